// The shared libpcap is loaded with dlopen(3) when a live capture is
// opened or the devices listed, not linked: mapping and relocating it and
// the eight libraries it needs (libdbus, libsystemd, libgcrypt…) added
// more than a millisecond to every start, also of runs that read files.
// Loaded when needed, they cost a live run no more than linked ones did
// (measured: a little less, the process's maps being shorter while the
// runtime starts), and ffpf runs on a machine without libpcap until it
// captures live. Filters are compiled by the copy linked statically
// (nodbus.c).

#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "ffpf_pcap.h"

// Each function's pointer, of the type pcap.h declares, and its wrapper.
#define FFPF_DEFINE_F(ret, name, params, args) \
	static __typeof__(name) *p_##name; \
	ret ffpf_##name params { return p_##name args; }
#define FFPF_DEFINE_V(name, params, args) \
	static __typeof__(name) *p_##name; \
	void ffpf_##name params { p_##name args; }
FFPF_PCAP_FUNCS(FFPF_DEFINE_F, FFPF_DEFINE_V)

static void *lib;      // libpcap, once loaded with every function
static char why[512];  // why it was not
static pthread_once_t once = PTHREAD_ONCE_INIT;

// sonames of libpcap: Debian's, most others', the development link's.
static const char *const sonames[] = {"libpcap.so.0.8", "libpcap.so.1", "libpcap.so"};

static void load(void) {
	void *h = NULL;
	size_t i;

	for (i = 0; h == NULL && i < sizeof sonames / sizeof sonames[0]; i++) {
		h = dlopen(sonames[i], RTLD_NOW | RTLD_LOCAL);
		if (h == NULL && i == 0)
			snprintf(why, sizeof why, "%s", dlerror());
	}
	if (h == NULL)
		return;
#define FFPF_LOOKUP(name) \
	if ((*(void **)&p_##name = dlsym(h, #name)) == NULL) { \
		snprintf(why, sizeof why, "%s has no %s", sonames[i - 1], #name); \
		return; \
	}
#define FFPF_LOOKUP_F(ret, name, params, args) FFPF_LOOKUP(name)
#define FFPF_LOOKUP_V(name, params, args) FFPF_LOOKUP(name)
	FFPF_PCAP_FUNCS(FFPF_LOOKUP_F, FFPF_LOOKUP_V)
	lib = h;
}

int ffpf_pcap_load(char *err, size_t n) {
	pthread_once(&once, load);
	if (lib == NULL) {
		snprintf(err, n, "%s", why);
		return -1;
	}
	return 0;
}
