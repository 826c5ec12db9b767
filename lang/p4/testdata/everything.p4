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
    bit<32> e_1_h32;
    bit<16> e_1_h16;
    bit<8> e_1_h8;
    bit<16> e_1_old;
    bit<16> e_1_new;
    bit<8> e_1_rnd;
    bit<64> e_1_wide;
    bit<1> e_1_flag;
}

struct e_1_d {
    bit<32> src;
    bit<16> v;
    bit<1> f;
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
    register<bit<16>>(32w64) e_1_r16;
    register<bit<64>>(32w4) e_1_r64;
    register<bit<1>>(32w8) e_1_r1;
    counter(32w8, CounterType.packets) e_1_cp;
    counter(32w2, CounterType.bytes) e_1_cb;

    action e_1_fwd(bit<9> port, bit<8> tag) {
        standard_metadata.egress_spec = port;
        hdr.ipv4.diffserv = tag;
        random(meta.e_1_rnd, 8w3, 8w200);
        {
            bit<1> ffpf_old;
            e_1_r1.read(ffpf_old, 32w2);
            bit<1> ffpf_new = ~ffpf_old;
            e_1_r1.write(32w2, ffpf_new);
        }
    }

    action e_1_drop() {
        mark_to_drop(standard_metadata);
    }

    action e_1_stamp(bit<16> v) {
        hdr.udp.setValid();
        hdr.udp.src_port = v;
        hdr.udp.dst_port = v |+| 16w65520;
    }

    apply {
        meta.e_1_flag = (bit<1>)hdr.tcp.isValid();
        if (hdr.ipv4.isValid()) {
            hash(meta.e_1_h32, HashAlgorithm.crc32, 32w0, {hdr.ipv4.src_addr, hdr.ipv4.dst_addr, 8w7}, 33w4294967296);
            hash(meta.e_1_h16, HashAlgorithm.crc16, 16w5, {hdr.ipv4.src_addr}, 32w1000);
            hash(meta.e_1_h8, HashAlgorithm.crc32, 64w300, {hdr.ipv4.dst_addr}, 9w256);
            hash(meta.e_1_wide, HashAlgorithm.identity, 64w0, {hdr.ipv4.src_addr, 8w0}, 41w1099511627776);
            {
                bit<16> ffpf_old;
                e_1_r16.read(ffpf_old, (bit<32>)meta.e_1_h32[5:0]);
                bit<16> ffpf_new = ffpf_old < 16w60000 && !(hdr.ipv4.ttl == 8w0) ? ffpf_old + (bit<16>)hdr.ipv4.ttl : ffpf_old;
                e_1_r16.write((bit<32>)meta.e_1_h32[5:0], ffpf_new);
                meta.e_1_old = ffpf_old;
                meta.e_1_new = ffpf_new;
            }
            {
                bit<64> ffpf_old;
                e_1_r64.read(ffpf_old, meta.e_1_h32 & 32w3);
                bit<64> ffpf_new = ffpf_old > meta.e_1_wide ? ffpf_old : meta.e_1_wide;
                e_1_r64.write(meta.e_1_h32 & 32w3, ffpf_new);
            }
            e_1_cp.count(meta.e_1_h32 >> 32w29);
            e_1_cb.count((bit<32>)meta.e_1_flag);
            if (hdr.ipv4.ttl >= 8w64) {
                e_1_fwd(9w3, hdr.ipv4.ttl ^ 8w90);
            } else if (hdr.ipv4.ttl <= 8w2 || meta.e_1_h8 | 8w1 != 8w129) {
                e_1_drop();
            } else {
                standard_metadata.egress_spec = (bit<9>)((bit<16>)hdr.ipv4.ttl << 16w1);
            }
            digest<e_1_d>(32w1, {hdr.ipv4.src_addr - hdr.ipv4.dst_addr, meta.e_1_new, meta.e_1_flag});
            if (hdr.ipv4.src_addr[7:0] == 8w1) {
                clone(CloneType.I2E, 32w5);
                clone(CloneType.I2E, 32w9);
            }
        } else {
            e_1_stamp(16w4242);
            hdr.udp.setInvalid();
            standard_metadata.egress_spec = 9w1;
        }
        if (hdr.tcp.isValid() && hdr.tcp.src_port == 16w22) {
            mark_to_drop(standard_metadata);
        }
    }
}

control ffpf_egress(inout headers_t hdr, inout metadata_t meta, inout standard_metadata_t standard_metadata) {
    register<bit<32>>(32w4) e_1_eg;
    counter(32w4, CounterType.packets_and_bytes) e_1_ceg;

    apply {
        if (standard_metadata.instance_type == 32w1) {
            {
                bit<32> ffpf_old;
                e_1_eg.read(ffpf_old, 32w1);
                bit<32> ffpf_new = ffpf_old + 32w1;
                e_1_eg.write(32w1, ffpf_new);
            }
            e_1_ceg.count((bit<32>)standard_metadata.egress_port);
        } else {
            e_1_ceg.count(32w0);
            if (standard_metadata.egress_port == 9w4) {
                mark_to_drop(standard_metadata);
            }
        }
    }
}

control ffpf_compute(inout headers_t hdr, inout metadata_t meta) {
    apply {
        update_checksum(hdr.ipv4.isValid(), {hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.diffserv, hdr.ipv4.total_len, hdr.ipv4.identification, hdr.ipv4.flags, hdr.ipv4.frag_offset, hdr.ipv4.ttl, hdr.ipv4.protocol, hdr.ipv4.src_addr, hdr.ipv4.dst_addr}, hdr.ipv4.hdr_checksum, HashAlgorithm.csum16);
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
