# ffpf — the two set-up commands are `make demo` and `make test`; both
# install what they need first (libpcap's headers, tcpdump for the oracle
# tests) when run as root, or print the exact command otherwise.

GO      ?= $(shell command -v go 2>/dev/null || echo /usr/local/go/bin/go)
BIN     := bin/ffpf
OUT     := out
export PATH := $(dir $(GO)):$(PATH)

.PHONY: all deps build demo test bench fuzz clean

# The command-line tests run again against make build's pair (ffpf
# without gRPC, ffpf-grpc beside it): the CLI contract, and every command
# that runs ffpf-grpc (p4, plugins, hierarchies).
NOGRPC_TESTS := TestSnaplenZero|TestRunHelpNamesEveryFlag|TestVersion|TestCheckUnreadableInput|TestNULInString|TestWritePcapng|TestHierarchyNotAFile|TestDirectionNeedsAnInterface|TestWorkersFlag|TestPlugins|TestP4|TestClasses|TestPlace|TestRunOnATestHierarchy|TestHierarchyCommand|TestBadHierarchyOrGroup|TestPaperExample|TestDefaultSource|TestWriteEndsToPcap|TestCheckPrints|TestBadInput|TestFilesRefused|TestStartup|TestGRPCDispatch|TestDaemon

all: build

deps:
	@scripts/deps.sh

# bin/ffpf is ffpf without its gRPC stacks (P4Runtime, the plugins'
# control plane) and the daemon with Prometheus's client library, which
# every process would initialise at start-up; it runs bin/ffpf-grpc, the
# whole build (go build ./cmd/ffpf), beside it for the commands that need
# them (cmd/ffpf/grpc.go).
build: deps
	$(GO) build -o $(BIN)-grpc ./cmd/ffpf
	$(GO) build -tags nogrpc -o $(BIN) ./cmd/ffpf

# The FFPF paper's example on two generated traces (no root, no NIC needed).
demo: build
	@mkdir -p $(OUT)
	@test -f $(OUT)/a.pcap || $(BIN) gen -o $(OUT)/a.pcap --packets 1000000 --seed 1
	@test -f $(OUT)/b.pcap || $(BIN) gen -o $(OUT)/b.pcap --packets 1000000 --seed 2
	$(BIN) run '[[(pcap,file=$(OUT)/a.pcap)|(pcap,file=$(OUT)/b.pcap)] > (BPF,expr="tcp and dst port 80")] > [(pktcount)|(bytecount)]'

# -timeout: cmd/ffpf alone takes 7 to 10 minutes on a loaded 2-core machine,
# go test's default limit.
test: deps
	$(GO) vet ./...
	$(GO) test -count=1 -timeout 30m ./...
	FFPF_TEST_NOGRPC=1 $(GO) test -count=1 -timeout 10m -run '$(NOGRPC_TESTS)' ./cmd/ffpf/
	$(GO) test -count=1 -timeout 30m -race ./buffers/ ./bridges/... ./flowspaces/... ./flowgraph/ ./functions/plugin/ ./flowgraph/daemon/ ./functions/dev/ ./functions/pcap/ ./functions/dta/...

# Throughput and latency against baselines run in the same script.
bench: build
	@scripts/bench.sh

fuzz: deps
	$(GO) test -run '^$$' -fuzz FuzzParse -fuzztime 60s ./lang/
	$(GO) test -run '^$$' -fuzz FuzzParse -fuzztime 60s ./lang/mafia/
	$(GO) test -run '^$$' -fuzz FuzzParse -fuzztime 60s -fuzzminimizetime 5s ./lang/p4/
	$(GO) test -run '^$$' -fuzz FuzzPopulate -fuzztime 60s ./flowgraph/
	$(GO) test -run '^$$' -fuzz FuzzRun -fuzztime 60s ./functions/bpf/
	$(GO) test -run '^$$' -fuzz FuzzReader -fuzztime 60s ./functions/pcap/
	$(GO) test -run '^$$' -fuzz FuzzParse -fuzztime 60s ./flowspaces/hierarchy/
	$(GO) test -run '^$$' -fuzz FuzzExtract -fuzztime 60s ./functions/flowkey/
	$(GO) test -run '^$$' -fuzz FuzzFields -fuzztime 60s ./functions/record/
	$(GO) test -run '^$$' -fuzz FuzzParse -fuzztime 60s ./functions/match/
	$(GO) test -run '^$$' -fuzz FuzzFrame -fuzztime 60s ./functions/match/
	$(GO) test -run '^$$' -fuzz FuzzIngestPayload -fuzztime 60s ./functions/dta/collector/

clean:
	rm -rf bin $(OUT)
