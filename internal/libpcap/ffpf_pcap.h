// The functions of the shared libpcap that live captures and the device
// list call, reached through pointers that load.c fills from dlopen(3):
// ffpf_pcap_load must have succeeded before any ffpf_pcap_* function is
// called. (Filters are compiled by the copy of libpcap linked statically:
// nodbus.c.)
#ifndef FFPF_PCAP_H
#define FFPF_PCAP_H

#include <stddef.h>
#include <stdio.h>
#include <pcap/pcap.h>

// FFPF_PCAP_FUNCS lists them, F for functions with a result and V for
// those without: return type, name, parameters, arguments.
#define FFPF_PCAP_FUNCS(F, V) \
	F(int, pcap_activate, (pcap_t *p), (p)) \
	V(pcap_close, (pcap_t *p), (p)) \
	F(pcap_t *, pcap_create, (const char *source, char *errbuf), (source, errbuf)) \
	F(int, pcap_datalink, (pcap_t *p), (p)) \
	F(int, pcap_findalldevs, (pcap_if_t **all, char *errbuf), (all, errbuf)) \
	V(pcap_freealldevs, (pcap_if_t *all), (all)) \
	F(int, pcap_get_selectable_fd, (pcap_t *p), (p)) \
	F(int, pcap_get_tstamp_precision, (pcap_t *p), (p)) \
	F(char *, pcap_geterr, (pcap_t *p), (p)) \
	F(int, pcap_next_ex, (pcap_t *p, struct pcap_pkthdr **h, const u_char **d), (p, h, d)) \
	F(int, pcap_set_buffer_size, (pcap_t *p, int size), (p, size)) \
	F(int, pcap_set_immediate_mode, (pcap_t *p, int on), (p, on)) \
	F(int, pcap_set_promisc, (pcap_t *p, int on), (p, on)) \
	F(int, pcap_set_snaplen, (pcap_t *p, int snaplen), (p, snaplen)) \
	F(int, pcap_set_timeout, (pcap_t *p, int ms), (p, ms)) \
	F(int, pcap_set_tstamp_precision, (pcap_t *p, int precision), (p, precision)) \
	F(int, pcap_setdirection, (pcap_t *p, pcap_direction_t d), (p, d)) \
	F(int, pcap_setnonblock, (pcap_t *p, int on, char *errbuf), (p, on, errbuf)) \
	F(int, pcap_snapshot, (pcap_t *p), (p)) \
	F(int, pcap_stats, (pcap_t *p, struct pcap_stat *ps), (p, ps)) \
	F(const char *, pcap_statustostr, (int status), (status))

#define FFPF_DECLARE_F(ret, name, params, args) ret ffpf_##name params;
#define FFPF_DECLARE_V(name, params, args) void ffpf_##name params;
FFPF_PCAP_FUNCS(FFPF_DECLARE_F, FFPF_DECLARE_V)

// ffpf_pcap_load waits until libpcap is loaded (see load.c) and returns
// 0, or -1 with the reason in err.
int ffpf_pcap_load(char *err, size_t n);

#endif
