#include <core.p4>
#include <v1model.p4>

header ethernet_t {
    bit<48> dst_addr;
    bit<48> src_addr;
    bit<16> ether_type;
}

header vlan_t {
    bit<3> pcp;
    bit<1> dei;
    bit<12> vid;
    bit<16> ether_type;
}

header ipv4_t {
    bit<4> version;
    bit<4> ihl;
    bit<8> diffserv;
    bit<16> total_len;
    bit<16> identification;
    bit<3> flags;
    bit<13> frag_offset;
    bit<8> ttl;
    bit<8> protocol;
    bit<16> hdr_checksum;
    bit<32> src_addr;
    bit<32> dst_addr;
}

header ipv4_options_t {
    varbit<320> options;
}

header ipv6_t {
    bit<4> version;
    bit<8> traffic_class;
    bit<20> flow_label;
    bit<16> payload_len;
    bit<8> next_hdr;
    bit<8> hop_limit;
    bit<64> src_hi;
    bit<64> src_lo;
    bit<64> dst_hi;
    bit<64> dst_lo;
}

header tcp_t {
    bit<16> src_port;
    bit<16> dst_port;
    bit<32> seq_no;
    bit<32> ack_no;
    bit<4> data_offset;
    bit<4> res;
    bit<8> flags;
    bit<16> window;
    bit<16> checksum;
    bit<16> urgent_ptr;
}

header udp_t {
    bit<16> src_port;
    bit<16> dst_port;
    bit<16> length;
    bit<16> checksum;
}

header icmp_t {
    bit<8> icmp_type;
    bit<8> code;
    bit<16> checksum;
}

struct headers_t {
    ethernet_t ethernet;
    vlan_t vlan0;
    vlan_t vlan1;
    ipv4_t ipv4;
    ipv4_options_t ipv4_options;
    ipv6_t ipv6;
    tcp_t tcp;
    udp_t udp;
    icmp_t icmp;
}

struct metadata_t {
    bit<8> t_2_class;
}

parser ffpf_parser(packet_in packet, out headers_t hdr, inout metadata_t meta, inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            16w0x8100: parse_vlan0;
            16w0x88a8: parse_vlan0;
            16w0x800: parse_ipv4;
            16w0x86dd: parse_ipv6;
            default: accept;
        }
    }

    state parse_vlan0 {
        packet.extract(hdr.vlan0);
        transition select(hdr.vlan0.ether_type) {
            16w0x8100: parse_vlan1;
            16w0x88a8: parse_vlan1;
            16w0x800: parse_ipv4;
            16w0x86dd: parse_ipv6;
            default: accept;
        }
    }

    state parse_vlan1 {
        packet.extract(hdr.vlan1);
        transition select(hdr.vlan1.ether_type) {
            16w0x800: parse_ipv4;
            16w0x86dd: parse_ipv6;
            default: accept;
        }
    }

    state parse_ipv4 {
        packet.extract(hdr.ipv4);
        transition select(hdr.ipv4.ihl, hdr.ipv4.frag_offset) {
            (4w0 &&& 4w12, _): accept;
            (4w4, _): accept;
            (4w5, 13w0): parse_ipv4_l4;
            (4w5, _): accept;
            (_, _): parse_ipv4_options;
            default: accept;
        }
    }

    state parse_ipv4_options {
        packet.extract(hdr.ipv4_options, (bit<32>)(hdr.ipv4.ihl - 4w5) << 32w5);
        transition select(hdr.ipv4.frag_offset) {
            13w0: parse_ipv4_l4;
            default: accept;
        }
    }

    state parse_ipv4_l4 {
        transition select(hdr.ipv4.protocol) {
            8w6: parse_tcp;
            8w17: parse_udp;
            8w1: parse_icmp;
            default: accept;
        }
    }

    state parse_ipv6 {
        packet.extract(hdr.ipv6);
        transition select(hdr.ipv6.next_hdr) {
            8w6: parse_tcp;
            8w17: parse_udp;
            default: accept;
        }
    }

    state parse_tcp {
        packet.extract(hdr.tcp);
        transition accept;
    }

    state parse_udp {
        packet.extract(hdr.udp);
        transition accept;
    }

    state parse_icmp {
        packet.extract(hdr.icmp);
        transition accept;
    }
}

control ffpf_verify(inout headers_t hdr, inout metadata_t meta) {
    apply {
    }
}

control ffpf_ingress(inout headers_t hdr, inout metadata_t meta, inout standard_metadata_t standard_metadata) {
    action t_2_set(bit<8> c) {
        meta.t_2_class = c;
    }

    action t_2_nop() {
    }

    action t_2_out(bit<9> port) {
        standard_metadata.egress_spec = port;
    }

    table t_2_routes {
        key = {
            hdr.ipv4.dst_addr: lpm;
        }
        actions = {
            t_2_out;
        }
        default_action = t_2_out(9w7);
        size = 16;
        const entries = {
            32w0xa000000 &&& 32w0xff000000: t_2_out(9w1);
            32w0xa000100 &&& 32w0xffffff00: t_2_out(9w2);
            32w0x0 &&& 32w0x0: t_2_out(9w3);
        }
    }

    table t_2_acl {
        key = {
            hdr.ipv4.protocol: ternary;
            hdr.tcp.dst_port: range;
            hdr.tcp.isValid(): exact;
        }
        actions = {
            t_2_set;
            @defaultonly t_2_nop;
        }
        default_action = t_2_nop();
        size = 64;
        const entries = {
            (_, 16w0x50 .. 16w0x50, true): t_2_set(8w2);
            (8w17, 16w0x0 .. 16w0xffff, false): t_2_set(8w3);
            (8w6, 16w0x0 .. 16w0x3ff, true): t_2_set(8w1);
        }
    }

    table t_2_ports {
        key = {
            standard_metadata.ingress_port: exact;
            hdr.ipv4.protocol: ternary;
        }
        actions = {
            t_2_set;
            t_2_nop;
        }
        default_action = t_2_set(8w9);
        size = 32;
    }

    apply {
        t_2_ports.apply();
        if (hdr.ipv4.isValid()) {
            t_2_acl.apply();
            t_2_routes.apply();
        }
        if (meta.t_2_class == 8w2) {
            hdr.ipv4.ttl = hdr.ipv4.ttl - 8w1;
        }
    }
}

control ffpf_egress(inout headers_t hdr, inout metadata_t meta, inout standard_metadata_t standard_metadata) {
    apply {
    }
}

control ffpf_compute(inout headers_t hdr, inout metadata_t meta) {
    apply {
    }
}

control ffpf_deparser(packet_out packet, in headers_t hdr) {
    apply {
        packet.emit(hdr.ethernet);
        packet.emit(hdr.vlan0);
        packet.emit(hdr.vlan1);
        packet.emit(hdr.ipv4);
        packet.emit(hdr.ipv4_options);
        packet.emit(hdr.ipv6);
        packet.emit(hdr.tcp);
        packet.emit(hdr.udp);
        packet.emit(hdr.icmp);
    }
}

V1Switch(ffpf_parser(), ffpf_verify(), ffpf_ingress(), ffpf_egress(), ffpf_compute(), ffpf_deparser()) main;
