package kernel

// State maps. A function whose code is ebpfgen.Mapped keeps some fields of
// its MBuf in array maps of its own, one u64 element per value: per-CPU
// when the class declares how the copies merge (sum, max, or), one shared
// map when it declares them shared. The sync copies each map into its
// field with the field's merge, as it sums the counter slots.

import (
	"errors"
	"fmt"
	"sync/atomic"
	"unsafe"

	"github.com/cilium/ebpf"

	"github.com/ffpf-go/ffpf/buffers"
	"github.com/ffpf-go/ffpf/functions"
	"github.com/ffpf-go/ffpf/functions/ebpfgen"
)

// maxMapValues bounds the values of one state map (per CPU): the memory
// a function may take in the kernel.
const maxMapValues = 1 << 22

// stateMap is one field of a function's MBuf kept in a map.
type stateMap struct {
	field buffers.Field
	merge functions.Merge
	m     *ebpf.Map
	keys  []uint32 // 0..n-1, for batch lookups
	vals  []uint64 // n values, or n × CPUs for a per-CPU map
}

// newStateMaps creates the maps of fn, a function of class c whose MBuf
// has fields (the class's layout for the flowspace's target).
func newStateMaps(c *functions.Class, fields []buffers.Field, fn ebpfgen.Function) (map[string]*stateMap, error) {
	mf, ok := fn.(ebpfgen.Mapped)
	if !ok {
		return nil, nil
	}
	maps := map[string]*stateMap{}
	fail := func(err error) (map[string]*stateMap, error) {
		closeMaps(maps)
		return nil, err
	}
	for _, mfield := range mf.MapFields() {
		name := mfield.Name
		at := -1
		for i, f := range fields {
			if f.Name == name {
				at = i
			}
		}
		if at < 0 {
			return fail(fmt.Errorf("its eBPF code keeps a state field %s its class does not declare", name))
		}
		if at < fn.StateSlots() {
			return fail(fmt.Errorf("its state field %s is both a counter slot and a map", name))
		}
		if maps[name] != nil {
			return fail(fmt.Errorf("its state field %s is kept in two maps", name))
		}
		f := fields[at]
		var merge functions.Merge
		if c.State != nil {
			for _, d := range c.State.Fields {
				if d.Name == name {
					merge = d.Merge
				}
			}
		}
		if merge == 0 {
			return fail(fmt.Errorf("class %s declares no merge for state field %s", c.Name, name))
		}
		n := max(f.Count, 1)
		if n > maxMapValues {
			return fail(fmt.Errorf("its state field %s has %d values, more than the %d an eBPF map of ffpf holds", name, n, maxMapValues))
		}
		typ, per := ebpf.PerCPUArray, ebpf.MustPossibleCPU()
		if merge == functions.MergeShared || mfield.Shared {
			typ, per = ebpf.Array, 1
		}
		m, err := ebpf.NewMap(&ebpf.MapSpec{Type: typ, KeySize: 4, ValueSize: 8, MaxEntries: uint32(n)})
		if err != nil {
			return fail(fmt.Errorf("cannot create the map of its state field %s (%d values): %w", name, n, err))
		}
		s := &stateMap{field: f, merge: merge, m: m, keys: make([]uint32, n), vals: make([]uint64, n*per)}
		for i := range s.keys {
			s.keys[i] = uint32(i)
		}
		maps[name] = s
	}
	return maps, nil
}

func closeMaps(maps map[string]*stateMap) {
	for _, s := range maps {
		s.m.Close()
	}
}

// fds gives an emitter the maps' file descriptors.
func fds(maps map[string]*stateMap) func(string) int {
	return func(name string) int {
		if s, ok := maps[name]; ok {
			return s.m.FD()
		}
		return -1 // the kernel refuses the program: no such map
	}
}

// read copies the map into its field of mbuf, merging the CPUs' copies.
func (s *stateMap) read(mbuf *buffers.MBuf) error {
	n := len(s.keys)
	var cursor ebpf.MapBatchCursor
	got, err := s.m.BatchLookup(&cursor, s.keys, s.vals, nil)
	if err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		return err
	}
	if got != n {
		return fmt.Errorf("read %d of the %d values of %s", got, n, s.field.Name)
	}
	per := len(s.vals) / n
	for i := range n {
		v := s.vals[i*per]
		for _, c := range s.vals[i*per+1 : (i+1)*per] {
			switch s.merge {
			case functions.MergeSum:
				v += c
			case functions.MergeMax:
				v = max(v, c)
			case functions.MergeOr:
				v |= c
			}
		}
		s.store(mbuf, i, v)
	}
	return nil
}

// store writes value i of the field atomically: a byte through its 32-bit
// word, as the sketches update bytes.
func (s *stateMap) store(mbuf *buffers.MBuf, i int, v uint64) {
	f := s.field
	switch f.Type {
	case buffers.U64, buffers.I64, buffers.F64:
		mbuf.Store64(f.Offset+8*i, v)
	case buffers.U32:
		storeU32(mbuf, f.Offset+4*i, uint32(v))
	case buffers.U8:
		storeU8(mbuf, f.Offset+i, uint8(v))
	}
}

func storeU32(m *buffers.MBuf, off int, v uint32) {
	atomic.StoreUint32((*uint32)(unsafe.Pointer(&m.Bytes()[off])), v)
}

func storeU8(m *buffers.MBuf, off int, v uint8) {
	w := (*uint32)(unsafe.Pointer(&m.Bytes()[off&^3]))
	var b [4]byte
	for {
		old := atomic.LoadUint32(w)
		buffers.Native.PutUint32(b[:], old)
		if b[off&3] == v {
			return
		}
		b[off&3] = v
		if atomic.CompareAndSwapUint32(w, old, buffers.Native.Uint32(b[:])) {
			return
		}
	}
}
