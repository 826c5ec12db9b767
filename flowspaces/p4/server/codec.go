package server

import (
	"math/bits"

	p4 "github.com/p4lang/p4runtime/go/p4/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// value reads a P4Runtime binary string as an unsigned value of w bits:
// big-endian, any length, its value within w bits (OUT_OF_RANGE
// otherwise, and for an empty string), as the spec's Bytestrings say.
func value(b []byte, w int, what string) (uint64, error) {
	if len(b) == 0 {
		return 0, status.Errorf(codes.OutOfRange, "%s is an empty string", what)
	}
	var v uint64
	for i, c := range b {
		if len(b)-i > 8 {
			if c != 0 {
				return 0, status.Errorf(codes.OutOfRange, "%s does not fit %d bits", what, w)
			}
			continue
		}
		v = v<<8 | uint64(c)
	}
	if w < 64 && v>>uint(w) != 0 {
		return 0, status.Errorf(codes.OutOfRange, "%s (%#x) does not fit %d bits", what, v, w)
	}
	return v, nil
}

// bytesOf writes v as the shortest binary string (read-write symmetry).
func bytesOf(v uint64) []byte {
	n := max(1, (bits.Len64(v)+7)/8)
	b := make([]byte, n)
	for i := n - 1; i >= 0; i-- {
		b[i] = byte(v)
		v >>= 8
	}
	return b
}

// encodeMeta builds the controller header of a PacketOut from its
// metadata: one value per metadata field of the P4Info, by id.
func encodeMeta(fields []metaInfo, md []*p4.PacketMetadata) ([]byte, error) {
	vals := make([]uint64, len(fields))
	got := make([]bool, len(fields))
	for _, m := range md {
		i := -1
		for j, f := range fields {
			if f.id == m.GetMetadataId() {
				i = j
			}
		}
		if i < 0 {
			return nil, status.Errorf(codes.InvalidArgument, "packet_out has no metadata id %d", m.GetMetadataId())
		}
		if got[i] {
			return nil, status.Errorf(codes.InvalidArgument, "packet_out metadata id %d is given twice", m.GetMetadataId())
		}
		v, err := value(m.GetValue(), fields[i].bits, "packet_out metadata")
		if err != nil {
			return nil, err
		}
		vals[i], got[i] = v, true
	}
	total := 0
	for i, f := range fields {
		if !got[i] {
			return nil, status.Errorf(codes.InvalidArgument, "packet_out metadata id %d is missing", f.id)
		}
		total += f.bits
	}
	out := make([]byte, total/8)
	off := 0
	for i, f := range fields {
		putBits(out, off, f.bits, vals[i])
		off += f.bits
	}
	return out, nil
}

// decodeMeta splits a frame to the CPU port into its packet_in header's
// metadata and the packet after it.
func decodeMeta(fields []metaInfo, frame []byte) ([]*p4.PacketMetadata, []byte, bool) {
	total := 0
	for _, f := range fields {
		total += f.bits
	}
	if len(frame) < total/8 {
		return nil, nil, false
	}
	var md []*p4.PacketMetadata
	off := 0
	for _, f := range fields {
		md = append(md, &p4.PacketMetadata{MetadataId: f.id, Value: bytesOf(getBits(frame, off, f.bits))})
		off += f.bits
	}
	return md, append([]byte(nil), frame[total/8:]...), true
}

func getBits(b []byte, off, n int) uint64 {
	var v uint64
	for i := range n {
		p := off + i
		v = v<<1 | uint64(b[p/8]>>(7-p%8)&1)
	}
	return v
}

func putBits(b []byte, off, n int, v uint64) {
	for i := range n {
		p := off + i
		bit := byte(v>>(n-1-i)) & 1
		b[p/8] = b[p/8]&^(1<<(7-p%8)) | bit<<(7-p%8)
	}
}
