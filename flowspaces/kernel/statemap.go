package kernel

// State maps. A function whose code is ebpfgen.Mapped keeps some fields of
// its MBuf in array maps of its own, one u64 element per value: per-CPU
// when the class declares how the copies merge (sum, max, or), one shared
// map when it declares them shared. The sync copies each map into its
// field with the field's merge, as it sums the counter slots. A function
// with window= keeps every field in two maps, one per epoch parity
// (window.go).

import (
	"errors"
	"fmt"
	"sync/atomic"
	"unsafe"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

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
	odd   *ebpf.Map // windowed: the map of the odd epochs (m is the even's)
	// mem maps a shared map's values into this process (m's, odd's):
	// read and swept by plain copies, not a system call per value.
	mem   [2]*ebpf.Memory
	keys  []uint32 // 0..n-1, for batch lookups and updates
	vals  []uint64 // n values, or n × CPUs for a per-CPU map
	zeros []uint64 // as long as vals, for a sweep (windowed)
}

// newStateMaps creates the maps of fn, a function of class c whose MBuf
// has fields (the class's layout for the flowspace's target), each with
// halves halves (2 for a function with window=, else 1).
func newStateMaps(c *functions.Class, fields []buffers.Field, fn ebpfgen.Function, halves int) (map[string]*stateMap, error) {
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
		var ms [2]*ebpf.Map
		var mem [2]*ebpf.Memory
		for h := range halves {
			spec := &ebpf.MapSpec{Type: typ, KeySize: 4, ValueSize: 8, MaxEntries: uint32(n)}
			if typ == ebpf.Array {
				spec.Flags = unix.BPF_F_MMAPABLE
			}
			m, err := ebpf.NewMap(spec)
			if err != nil && spec.Flags != 0 {
				spec.Flags = 0 // a kernel that cannot map it: system calls
				m, err = ebpf.NewMap(spec)
			}
			if err != nil {
				if ms[0] != nil {
					ms[0].Close()
				}
				return fail(fmt.Errorf("cannot create the map of its state field %s (%d values): %w", name, n, err))
			}
			ms[h] = m
			if spec.Flags != 0 {
				if mm, err := m.Memory(); err == nil {
					mem[h] = mm
				}
			}
		}
		s := &stateMap{field: f, merge: merge, m: ms[0], odd: ms[1], mem: mem, keys: make([]uint32, n), vals: make([]uint64, n*per)}
		if halves > 1 {
			s.zeros = make([]uint64, n*per)
		}
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
		if s.odd != nil {
			s.odd.Close()
		}
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

// oddFds gives an emitter the file descriptors of the maps of the odd
// epochs (windowed).
func oddFds(maps map[string]*stateMap) func(string) int {
	return func(name string) int {
		if s, ok := maps[name]; ok && s.odd != nil {
			return s.odd.FD()
		}
		return -1
	}
}

// half returns the map of parity h.
func (s *stateMap) half(h int) *ebpf.Map {
	if h == 1 {
		return s.odd
	}
	return s.m
}

// read copies half 0 of the map into its field of mbuf, merging the CPUs'
// copies.
func (s *stateMap) read(mbuf *buffers.MBuf) error { return s.readHalf(mbuf, 0) }

// readHalf copies half h of the map into its field of mbuf.
func (s *stateMap) readHalf(mbuf *buffers.MBuf, h int) error {
	n := len(s.keys)
	if mm := s.mem[h]; mm != nil {
		if _, err := mm.ReadAt(words(s.vals), 0); err != nil {
			return err
		}
	} else {
		var cursor ebpf.MapBatchCursor
		got, err := s.half(h).BatchLookup(&cursor, s.keys, s.vals, nil)
		if err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return err
		}
		if got != n {
			return fmt.Errorf("read %d of the %d values of %s", got, n, s.field.Name)
		}
	}
	per := len(s.vals) / n
	vals := s.vals
	for i := range n {
		v := vals[i*per]
		for _, c := range vals[i*per+1 : (i+1)*per] {
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

// sweep zeroes half h of the map: the Go half's reset of a window, while
// the programs write the other half.
func (s *stateMap) sweep(h int) error {
	if mm := s.mem[h]; mm != nil {
		_, err := mm.WriteAt(words(s.zeros), 0)
		return err
	}
	_, err := s.half(h).BatchUpdate(s.keys, s.zeros, nil)
	return err
}

// words is v's memory.
func words(v []uint64) []byte {
	if len(v) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), 8*len(v))
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
