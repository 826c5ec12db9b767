package libpcap

/*
#include <stdlib.h>
#include "ffpf_pcap.h"
*/
import "C"

import (
	"errors"
	"sync"
	"unsafe"
)

// load loads libpcap the first time it is called (load.c), and reports
// why it could not be loaded. Every entry point of the package calls it
// first; Handle's methods need not, as a Handle exists only once it
// succeeded.
var load = sync.OnceValue(func() error {
	const n = 512
	why := (*C.char)(C.calloc(n, 1))
	defer C.free(unsafe.Pointer(why))
	if C.ffpf_pcap_load(why, n) != 0 {
		return errors.New("libpcap, which compiles filters and captures live, could not be loaded: " + C.GoString(why))
	}
	return nil
})
