module github.com/ffpf-go/ffpf

go 1.26.8

require (
	github.com/google/gopacket v1.1.19
	golang.org/x/net v0.62.0
	golang.org/x/term v0.47.0
)

require (
	github.com/asavie/xdp v0.3.3
	github.com/cilium/ebpf v0.22.0
	github.com/cloudflare/cbpfc v0.0.0-20260219140841-0661ad29132c
	github.com/vishvananda/netlink v1.1.0
	golang.org/x/sys v0.49.0
	gopkg.in/yaml.v3 v3.0.1
)

require (
	github.com/pkg/errors v0.9.1 // indirect
	github.com/vishvananda/netns v0.0.0-20191106174202-0a2b9b5464df // indirect
)
