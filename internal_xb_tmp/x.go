package xb
import ("github.com/cilium/ebpf"; "github.com/cilium/ebpf/features"; "github.com/cilium/ebpf/rlimit")
func F() error { rlimit.RemoveMemlock(); return features.HaveProgramType(ebpf.XDP) }
