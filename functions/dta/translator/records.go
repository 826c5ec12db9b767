package translator

import (
	"encoding/hex"
	"errors"
	"fmt"
	"unsafe"

	"github.com/ffpf-go/ffpf/functions/dta/layout"
	"github.com/ffpf-go/ffpf/functions/record"
)

// A write as an ffpf record (kind Report), as the dta-translator class
// emits it:
//
//	region  string  keywrite, keyincrement, postcards, append
//	list    u64     the Append list (append only)
//	offset  u64     bytes from the start of the region (of the list)
//	length  u64     bytes written (8 for a Fetch&Add)
//	data    string  the bytes written, in hex (writes)
//	add     u64     the operand (Fetch&Add, keyincrement)
//
// ApplyRecord reads one back into a Memory, so that a capture of the
// translator's output can be replayed into a collector.

// MaxWriteBytes is the most bytes one write carries (an Append batch of 16).
const MaxWriteBytes = MaxBatch * layout.AppendEntrySize

// recorder is a Memory that writes each write as a record.
type recorder struct {
	out *record.Out
	id  string
	ts  int64
	hex [2 * MaxWriteBytes]byte
}

func (r *recorder) Apply(w *Write) {
	r.out.Start(record.Report, r.ts, r.id)
	r.out.String("region", w.Region.String())
	if w.Region == Append {
		r.out.U64("list", uint64(w.List))
	}
	r.out.U64("offset", w.Offset)
	if w.Data == nil {
		r.out.U64("length", layout.CounterSize)
		r.out.U64("add", w.Add)
	} else {
		r.out.U64("length", uint64(len(w.Data)))
		n := hex.Encode(r.hex[:], w.Data)
		// The builder copies the string into the record at once: a view
		// of the buffer saves allocating one per write.
		r.out.String("data", unsafe.String(&r.hex[0], n))
	}
	r.out.Commit()
}

var regions = map[string]Region{"keywrite": KeyWrite, "keyincrement": KeyIncrement, "postcards": Postcards, "append": Append}

// ApplyRecord applies the write a record of the translator holds to m.
func ApplyRecord(rec []byte, m Memory) error {
	u64 := func(name string) (uint64, error) {
		f, ok := record.Find(rec, name)
		if !ok || f.Type != record.U64 {
			return 0, fmt.Errorf("write record without %s", name)
		}
		return f.Uint(), nil
	}
	f, ok := record.Find(rec, "region")
	if !ok || f.Type != record.String {
		return errors.New("not a write record (no region)")
	}
	w := Write{Region: regions[string(f.Raw)]}
	if w.Region == 0 {
		return fmt.Errorf("write record of unknown region %q", f.Raw)
	}
	var err error
	if w.Offset, err = u64("offset"); err != nil {
		return err
	}
	if w.Region == Append {
		l, err := u64("list")
		if err != nil {
			return err
		}
		w.List = uint32(l)
	}
	if w.Region == KeyIncrement {
		if w.Add, err = u64("add"); err != nil {
			return err
		}
	} else {
		d, ok := record.Find(rec, "data")
		if !ok || d.Type != record.String {
			return errors.New("write record without data")
		}
		var buf [MaxWriteBytes]byte
		if len(d.Raw) > 2*MaxWriteBytes {
			return fmt.Errorf("write record of %d bytes", len(d.Raw)/2)
		}
		n, err := hex.Decode(buf[:], d.Raw)
		if err != nil {
			return fmt.Errorf("write record: %v", err)
		}
		w.Data = buf[:n]
	}
	m.Apply(&w)
	return nil
}
