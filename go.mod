module github.com/ffpf-go/ffpf

go 1.26.8

require (
	github.com/google/gopacket v1.1.19 // indirect
	golang.org/x/net v0.62.0 // indirect
	golang.org/x/sys v0.49.0 // indirect
	golang.org/x/term v0.47.0 // indirect
)
