//go:build ignore

// smalltrace writes a classic pcap trace of small packets (60 to 128 bytes:
// Ethernet, IPv4, TCP or UDP to ports 80, 443, 53 and 8080) for make bench:
// per-record costs dominate a replay of such a file.
//
//	go run scripts/smalltrace.go -o small.pcap -packets 3000000
package main

import (
	"bufio"
	"encoding/binary"
	"flag"
	"log"
	"math/rand"
	"os"
)

func main() {
	out := flag.String("o", "small.pcap", "the trace to write")
	packets := flag.Int("packets", 3000000, "number of packets")
	flag.Parse()
	rng := rand.New(rand.NewSource(7))
	frames := make([][]byte, 4096)
	for i := range frames {
		size := 60 + rng.Intn(69)
		f := make([]byte, size)
		copy(f, []byte{2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 8, 0})
		ip := f[14:]
		ip[0], ip[8] = 0x45, 64
		binary.BigEndian.PutUint16(ip[2:], uint16(size-14))
		binary.BigEndian.PutUint16(ip[4:], uint16(i))
		copy(ip[12:], []byte{10, 0, byte(i >> 8), byte(i)})
		copy(ip[16:], []byte{10, 1, 0, byte(1 + rng.Intn(254))})
		l4 := ip[20:]
		binary.BigEndian.PutUint16(l4, uint16(1024+i))
		binary.BigEndian.PutUint16(l4[2:], []uint16{80, 443, 53, 8080}[rng.Intn(4)])
		if i%3 == 0 {
			ip[9] = 17
			binary.BigEndian.PutUint16(l4[4:], uint16(size-34))
		} else {
			ip[9] = 6
			binary.BigEndian.PutUint32(l4[4:], uint32(i))
			l4[12], l4[13] = 0x50, 0x18
			binary.BigEndian.PutUint16(l4[14:], 1024)
		}
		frames[i] = f
	}
	fd, err := os.Create(*out)
	if err != nil {
		log.Fatal(err)
	}
	w := bufio.NewWriterSize(fd, 1<<20)
	h := make([]byte, 24)
	binary.LittleEndian.PutUint32(h, 0xa1b2c3d4)
	binary.LittleEndian.PutUint16(h[4:], 2)
	binary.LittleEndian.PutUint16(h[6:], 4)
	binary.LittleEndian.PutUint32(h[16:], 262144)
	binary.LittleEndian.PutUint32(h[20:], 1)
	w.Write(h)
	rh := make([]byte, 16)
	for i := range *packets {
		f := frames[i%len(frames)]
		binary.LittleEndian.PutUint32(rh, uint32(1700000000+i/1000000))
		binary.LittleEndian.PutUint32(rh[4:], uint32(i%1000000))
		binary.LittleEndian.PutUint32(rh[8:], uint32(len(f)))
		binary.LittleEndian.PutUint32(rh[12:], uint32(len(f)))
		w.Write(rh)
		w.Write(f)
	}
	if err := w.Flush(); err != nil {
		log.Fatal(err)
	}
	if err := fd.Close(); err != nil {
		log.Fatal(err)
	}
}
