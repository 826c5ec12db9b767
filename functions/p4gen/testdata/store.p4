#include <core.p4>
#include <v1model.p4>

header eth_dst_0_t {
    bit<8> dst_0;
}

header eth_dst_1_t {
    bit<40> dst_1;
}

header eth_src_t {
    bit<48> src;
}

header eth_type_t {
    bit<16> ether_type;
}

header vlan_tci_t {
    bit<3> pcp;
    bit<1> dei;
    bit<12> vid;
}

header vlan_type_t {
    bit<16> ether_type;
}

header ipv4_vihl_t {
    bit<4> version;
    bit<4> ihl;
}

header ipv4_tos_t {
    bit<8> diffserv;
}

header ipv4_len_t {
    bit<16> total_len;
}

header ipv4_id_0_t {
    bit<8> id_0;
}

header ipv4_id_1_t {
    bit<8> id_1;
}

header ipv4_frag_t {
    bit<3> flags;
    bit<13> frag_offset;
}

header ipv4_ttl_t {
    bit<8> ttl;
}

header ipv4_proto_t {
    bit<8> protocol;
}

header ipv4_csum_t {
    bit<16> hdr_checksum;
}

header ipv4_src_0_t {
    bit<8> src_0;
}

header ipv4_src_1_t {
    bit<8> src_1;
}

header ipv4_src_2_t {
    bit<16> src_2;
}

header ipv4_dst_0_t {
    bit<8> dst_0;
}

header ipv4_dst_1_t {
    bit<8> dst_1;
}

header ipv4_dst_2_t {
    bit<16> dst_2;
}

header ipv4_opts_t {
    varbit<320> options;
}

header ipv6_vtf_t {
    bit<4> version;
    bit<8> traffic_class;
    bit<20> flow_label;
}

header ipv6_plen_t {
    bit<16> payload_len;
}

header ipv6_nh_t {
    bit<8> next_hdr;
}

header ipv6_hlim_t {
    bit<8> hop_limit;
}

header ipv6_src_0_t {
    bit<32> src_0;
}

header ipv6_src_1_t {
    bit<32> src_1;
}

header ipv6_src_2_t {
    bit<32> src_2;
}

header ipv6_src_3_t {
    bit<32> src_3;
}

header ipv6_dst_0_t {
    bit<8> dst_0;
}

header ipv6_dst_1_t {
    bit<24> dst_1;
}

header ipv6_dst_2_t {
    bit<32> dst_2;
}

header ipv6_dst_3_t {
    bit<32> dst_3;
}

header ipv6_dst_4_t {
    bit<32> dst_4;
}

header ipv6_ext_nh_t {
    bit<8> next_hdr;
}

header ipv6_ext_len_t {
    bit<8> hdr_ext_len;
}

header ipv6_ext_opt_t {
    varbit<16368> data;
}

header ipv6_ext_frag_t {
    bit<13> frag_offset;
    bit<2> res;
    bit<1> m;
}

header ipv6_ext_id_t {
    bit<32> id;
}

header arp_fixed_t {
    bit<16> htype;
    bit<16> ptype;
    bit<8> hlen;
    bit<8> plen;
    bit<16> oper;
}

header arp_sha_t {
    bit<48> sha;
}

header arp_spa_t {
    bit<32> spa;
}

header arp_tha_t {
    bit<48> tha;
}

header arp_tpa_t {
    bit<32> tpa;
}

header l4_sport_t {
    bit<16> src_port;
}

header l4_dport_t {
    bit<16> dst_port;
}

header tcp_seq_t {
    bit<32> seq_no;
}

header tcp_ack_t {
    bit<32> ack_no;
}

header tcp_off_t {
    bit<4> data_offset;
    bit<4> res;
}

header tcp_flags_t {
    bit<8> flags;
}

header tcp_win_t {
    bit<16> window;
}

header tcp_csum_t {
    bit<16> checksum;
}

header tcp_urg_t {
    bit<16> urgent_ptr;
}

header udp_len_t {
    bit<16> length;
}

header udp_csum_t {
    bit<16> checksum;
}

header icmp_type_t {
    bit<8> icmp_type;
}

header icmp_code_t {
    bit<8> code;
}

header icmp_csum_t {
    bit<16> checksum;
}

struct headers_t {
    eth_dst_0_t eth_dst_0;
    eth_dst_1_t eth_dst_1;
    eth_src_t eth_src;
    eth_type_t eth_type;
    vlan_tci_t vlan0_tci;
    vlan_type_t vlan0_type;
    vlan_tci_t vlan1_tci;
    vlan_type_t vlan1_type;
    vlan_tci_t vlan2_tci;
    vlan_type_t vlan2_type;
    vlan_tci_t vlan3_tci;
    vlan_type_t vlan3_type;
    ipv4_vihl_t ipv4_vihl;
    ipv4_tos_t ipv4_tos;
    ipv4_len_t ipv4_len;
    ipv4_id_0_t ipv4_id_0;
    ipv4_id_1_t ipv4_id_1;
    ipv4_frag_t ipv4_frag;
    ipv4_ttl_t ipv4_ttl;
    ipv4_proto_t ipv4_proto;
    ipv4_csum_t ipv4_csum;
    ipv4_src_0_t ipv4_src_0;
    ipv4_src_1_t ipv4_src_1;
    ipv4_src_2_t ipv4_src_2;
    ipv4_dst_0_t ipv4_dst_0;
    ipv4_dst_1_t ipv4_dst_1;
    ipv4_dst_2_t ipv4_dst_2;
    ipv4_opts_t ipv4_opts;
    ipv6_vtf_t ipv6_vtf;
    ipv6_plen_t ipv6_plen;
    ipv6_nh_t ipv6_nh;
    ipv6_hlim_t ipv6_hlim;
    ipv6_src_0_t ipv6_src_0;
    ipv6_src_1_t ipv6_src_1;
    ipv6_src_2_t ipv6_src_2;
    ipv6_src_3_t ipv6_src_3;
    ipv6_dst_0_t ipv6_dst_0;
    ipv6_dst_1_t ipv6_dst_1;
    ipv6_dst_2_t ipv6_dst_2;
    ipv6_dst_3_t ipv6_dst_3;
    ipv6_dst_4_t ipv6_dst_4;
    ipv6_ext_nh_t ext0_nh;
    ipv6_ext_len_t ext0_len;
    ipv6_ext_opt_t ext0_opt;
    ipv6_ext_frag_t ext0_frag;
    ipv6_ext_id_t ext0_id;
    ipv6_ext_nh_t ext1_nh;
    ipv6_ext_len_t ext1_len;
    ipv6_ext_opt_t ext1_opt;
    ipv6_ext_frag_t ext1_frag;
    ipv6_ext_id_t ext1_id;
    ipv6_ext_nh_t ext2_nh;
    ipv6_ext_len_t ext2_len;
    ipv6_ext_opt_t ext2_opt;
    ipv6_ext_frag_t ext2_frag;
    ipv6_ext_id_t ext2_id;
    ipv6_ext_nh_t ext3_nh;
    ipv6_ext_len_t ext3_len;
    ipv6_ext_opt_t ext3_opt;
    ipv6_ext_frag_t ext3_frag;
    ipv6_ext_id_t ext3_id;
    ipv6_ext_nh_t ext4_nh;
    ipv6_ext_len_t ext4_len;
    ipv6_ext_opt_t ext4_opt;
    ipv6_ext_frag_t ext4_frag;
    ipv6_ext_id_t ext4_id;
    ipv6_ext_nh_t ext5_nh;
    ipv6_ext_len_t ext5_len;
    ipv6_ext_opt_t ext5_opt;
    ipv6_ext_frag_t ext5_frag;
    ipv6_ext_id_t ext5_id;
    ipv6_ext_nh_t ext6_nh;
    ipv6_ext_len_t ext6_len;
    ipv6_ext_opt_t ext6_opt;
    ipv6_ext_frag_t ext6_frag;
    ipv6_ext_id_t ext6_id;
    ipv6_ext_nh_t ext7_nh;
    ipv6_ext_len_t ext7_len;
    ipv6_ext_opt_t ext7_opt;
    ipv6_ext_frag_t ext7_frag;
    ipv6_ext_id_t ext7_id;
    arp_fixed_t arp_fixed;
    arp_sha_t arp_sha;
    arp_spa_t arp_spa;
    arp_tha_t arp_tha;
    arp_tpa_t arp_tpa;
    l4_sport_t l4_sport;
    l4_dport_t l4_dport;
    tcp_seq_t tcp_seq;
    tcp_ack_t tcp_ack;
    tcp_off_t tcp_off;
    tcp_flags_t tcp_flags;
    tcp_win_t tcp_win;
    tcp_csum_t tcp_csum;
    tcp_urg_t tcp_urg;
    udp_len_t udp_len;
    udp_csum_t udp_csum;
    icmp_type_t icmp_type;
    icmp_code_t icmp_code;
    icmp_csum_t icmp_csum;
}

struct metadata_t {
    bit<1> ffpf_v4;
    bit<1> ffpf_v6;
    bit<32> ffpf_l3;
    bit<1> f_1_haskey;
    bit<64> f_1_key0;
    bit<64> f_1_key1;
    bit<64> f_1_key2;
    bit<64> f_1_key3;
    bit<64> f_1_key4;
    bit<32> ffpf_cap;
    bit<32> ffpf_lim4;
    bit<32> ffpf_l4len4;
    bit<32> ffpf_lim6;
    bit<8> ffpf_proto6;
    bit<1> ffpf_l4ok6;
    bit<32> ffpf_l4len6;
    bit<1> ffpf_ext0;
    bit<1> ffpf_frag0;
    bit<1> ffpf_later0;
    bit<32> ffpf_sz0;
    bit<32> ffpf_a0;
    bit<32> ffpf_b0;
    bit<32> ffpf_c0;
    bit<1> ffpf_bad0;
    bit<1> ffpf_ext1;
    bit<1> ffpf_frag1;
    bit<1> ffpf_later1;
    bit<32> ffpf_sz1;
    bit<32> ffpf_a1;
    bit<32> ffpf_b1;
    bit<32> ffpf_c1;
    bit<1> ffpf_bad1;
    bit<1> ffpf_ext2;
    bit<1> ffpf_frag2;
    bit<1> ffpf_later2;
    bit<32> ffpf_sz2;
    bit<32> ffpf_a2;
    bit<32> ffpf_b2;
    bit<32> ffpf_c2;
    bit<1> ffpf_bad2;
    bit<1> ffpf_ext3;
    bit<1> ffpf_frag3;
    bit<1> ffpf_later3;
    bit<32> ffpf_sz3;
    bit<32> ffpf_a3;
    bit<32> ffpf_b3;
    bit<32> ffpf_c3;
    bit<1> ffpf_bad3;
    bit<1> ffpf_ext4;
    bit<1> ffpf_frag4;
    bit<1> ffpf_later4;
    bit<32> ffpf_sz4;
    bit<32> ffpf_a4;
    bit<32> ffpf_b4;
    bit<32> ffpf_c4;
    bit<1> ffpf_bad4;
    bit<1> ffpf_ext5;
    bit<1> ffpf_frag5;
    bit<1> ffpf_later5;
    bit<32> ffpf_sz5;
    bit<32> ffpf_a5;
    bit<32> ffpf_b5;
    bit<32> ffpf_c5;
    bit<1> ffpf_bad5;
    bit<1> ffpf_ext6;
    bit<1> ffpf_frag6;
    bit<1> ffpf_later6;
    bit<32> ffpf_sz6;
    bit<32> ffpf_a6;
    bit<32> ffpf_b6;
    bit<32> ffpf_c6;
    bit<1> ffpf_bad6;
    bit<1> ffpf_ext7;
    bit<1> ffpf_frag7;
    bit<1> ffpf_later7;
    bit<32> ffpf_sz7;
    bit<32> ffpf_a7;
    bit<32> ffpf_b7;
    bit<32> ffpf_c7;
    bit<1> ffpf_bad7;
    bit<1> ffpf_ext8;
    bit<64> f_1_v;
    bit<32> f_1_h1;
    bit<16> f_1_h2;
    bit<32> f_1_pos0;
    bit<32> f_1_pos1;
    bit<64> f_1_old0;
    bit<64> f_1_old1;
    bit<1> f_1_any;
    bit<1> f_1_all;
    bit<1> f_1_stored;
}

parser ffpf_parser(packet_in packet, out headers_t hdr, inout metadata_t meta, inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.eth_dst_0);
        packet.extract(hdr.eth_dst_1);
        packet.extract(hdr.eth_src);
        packet.extract(hdr.eth_type);
        transition select(hdr.eth_type.ether_type) {
            16w0x8100: parse_vlan0;
            16w0x88a8: parse_vlan0;
            16w0x9100: parse_vlan0;
            16w0x800: parse_ipv4;
            16w0x86dd: parse_ipv6;
            16w0x806: parse_arp;
            16w0x8035: parse_arp;
            default: accept;
        }
    }

    state parse_vlan0 {
        packet.extract(hdr.vlan0_tci);
        packet.extract(hdr.vlan0_type);
        transition select(hdr.vlan0_type.ether_type) {
            16w0x8100: parse_vlan1;
            16w0x88a8: parse_vlan1;
            16w0x9100: parse_vlan1;
            16w0x800: parse_ipv4;
            16w0x86dd: parse_ipv6;
            16w0x806: parse_arp;
            16w0x8035: parse_arp;
            default: accept;
        }
    }

    state parse_vlan1 {
        packet.extract(hdr.vlan1_tci);
        packet.extract(hdr.vlan1_type);
        transition select(hdr.vlan1_type.ether_type) {
            16w0x8100: parse_vlan2;
            16w0x88a8: parse_vlan2;
            16w0x9100: parse_vlan2;
            16w0x800: parse_ipv4;
            16w0x86dd: parse_ipv6;
            16w0x806: parse_arp;
            16w0x8035: parse_arp;
            default: accept;
        }
    }

    state parse_vlan2 {
        packet.extract(hdr.vlan2_tci);
        packet.extract(hdr.vlan2_type);
        transition select(hdr.vlan2_type.ether_type) {
            16w0x8100: parse_vlan3;
            16w0x88a8: parse_vlan3;
            16w0x9100: parse_vlan3;
            16w0x800: parse_ipv4;
            16w0x86dd: parse_ipv6;
            16w0x806: parse_arp;
            16w0x8035: parse_arp;
            default: accept;
        }
    }

    state parse_vlan3 {
        packet.extract(hdr.vlan3_tci);
        packet.extract(hdr.vlan3_type);
        transition select(hdr.vlan3_type.ether_type) {
            16w0x8100: accept;
            16w0x88a8: accept;
            16w0x9100: accept;
            16w0x800: parse_ipv4;
            16w0x86dd: parse_ipv6;
            16w0x806: parse_arp;
            16w0x8035: parse_arp;
            default: accept;
        }
    }

    state parse_ipv4 {
        packet.extract(hdr.ipv4_vihl);
        packet.extract(hdr.ipv4_tos);
        packet.extract(hdr.ipv4_len);
        packet.extract(hdr.ipv4_id_0);
        packet.extract(hdr.ipv4_id_1);
        packet.extract(hdr.ipv4_frag);
        packet.extract(hdr.ipv4_ttl);
        packet.extract(hdr.ipv4_proto);
        packet.extract(hdr.ipv4_csum);
        packet.extract(hdr.ipv4_src_0);
        packet.extract(hdr.ipv4_src_1);
        packet.extract(hdr.ipv4_src_2);
        packet.extract(hdr.ipv4_dst_0);
        packet.extract(hdr.ipv4_dst_1);
        packet.extract(hdr.ipv4_dst_2);
        transition select(hdr.ipv4_vihl.ihl, hdr.ipv4_frag.frag_offset, hdr.ipv4_proto.protocol) {
            (4w5, 13w0, 8w6): parse_tcp;
            (4w5, 13w0, 8w17): parse_udp;
            (4w5, 13w0, 8w132): parse_sctp;
            (4w5, 13w0, 8w1): parse_icmp;
            (4w5, _, _): accept;
            (4w1, 13w0, 8w6): parse_tcp_at16;
            (4w2, 13w0, 8w6): parse_tcp_at12;
            (4w3, 13w0, 8w6): parse_tcp_at8;
            (4w4, 13w0, 8w6): parse_tcp_at4;
            (4w4, 13w0, 8w17): parse_udp_at4;
            (4w0 &&& 4w12, _, _): accept;
            (4w4, _, _): accept;
            default: parse_ipv4_options;
        }
    }

    state parse_ipv4_options {
        packet.extract(hdr.ipv4_opts, (bit<32>)(hdr.ipv4_vihl.ihl - 4w5) << 32w5);
        transition select(hdr.ipv4_frag.frag_offset, hdr.ipv4_proto.protocol) {
            (13w0, 8w6): parse_tcp;
            (13w0, 8w17): parse_udp;
            (13w0, 8w132): parse_sctp;
            (13w0, 8w1): parse_icmp;
            default: accept;
        }
    }

    state parse_ipv6 {
        packet.extract(hdr.ipv6_vtf);
        packet.extract(hdr.ipv6_plen);
        packet.extract(hdr.ipv6_nh);
        packet.extract(hdr.ipv6_hlim);
        packet.extract(hdr.ipv6_src_0);
        packet.extract(hdr.ipv6_src_1);
        packet.extract(hdr.ipv6_src_2);
        packet.extract(hdr.ipv6_src_3);
        packet.extract(hdr.ipv6_dst_0);
        packet.extract(hdr.ipv6_dst_1);
        packet.extract(hdr.ipv6_dst_2);
        packet.extract(hdr.ipv6_dst_3);
        packet.extract(hdr.ipv6_dst_4);
        transition select(hdr.ipv6_nh.next_hdr) {
            8w6: parse_tcp;
            8w17: parse_udp;
            8w132: parse_sctp;
            8w58: parse_icmp;
            8w0: parse_ext0_opt;
            8w43: parse_ext0_opt;
            8w60: parse_ext0_opt;
            8w44: parse_ext0_frag;
            default: accept;
        }
    }

    state parse_ext0_opt {
        packet.extract(hdr.ext0_nh);
        packet.extract(hdr.ext0_len);
        packet.extract(hdr.ext0_opt, ((bit<32>)hdr.ext0_len.hdr_ext_len << 32w6) + 32w48);
        transition select(hdr.ext0_nh.next_hdr) {
            8w6: parse_tcp;
            8w17: parse_udp;
            8w132: parse_sctp;
            8w58: parse_icmp;
            8w0: parse_ext1_opt;
            8w43: parse_ext1_opt;
            8w60: parse_ext1_opt;
            8w44: parse_ext1_frag;
            default: accept;
        }
    }

    state parse_ext0_frag {
        packet.extract(hdr.ext0_nh);
        packet.extract(hdr.ext0_len);
        packet.extract(hdr.ext0_frag);
        packet.extract(hdr.ext0_id);
        transition select(hdr.ext0_frag.frag_offset, hdr.ext0_nh.next_hdr) {
            (13w0, 8w6): parse_tcp;
            (13w0, 8w17): parse_udp;
            (13w0, 8w132): parse_sctp;
            (13w0, 8w58): parse_icmp;
            (13w0, 8w0): parse_ext1_opt;
            (13w0, 8w43): parse_ext1_opt;
            (13w0, 8w60): parse_ext1_opt;
            (13w0, 8w44): parse_ext1_frag;
            default: accept;
        }
    }

    state parse_ext1_opt {
        packet.extract(hdr.ext1_nh);
        packet.extract(hdr.ext1_len);
        packet.extract(hdr.ext1_opt, ((bit<32>)hdr.ext1_len.hdr_ext_len << 32w6) + 32w48);
        transition select(hdr.ext1_nh.next_hdr) {
            8w6: parse_tcp;
            8w17: parse_udp;
            8w132: parse_sctp;
            8w58: parse_icmp;
            8w0: parse_ext2_opt;
            8w43: parse_ext2_opt;
            8w60: parse_ext2_opt;
            8w44: parse_ext2_frag;
            default: accept;
        }
    }

    state parse_ext1_frag {
        packet.extract(hdr.ext1_nh);
        packet.extract(hdr.ext1_len);
        packet.extract(hdr.ext1_frag);
        packet.extract(hdr.ext1_id);
        transition select(hdr.ext1_frag.frag_offset, hdr.ext1_nh.next_hdr) {
            (13w0, 8w6): parse_tcp;
            (13w0, 8w17): parse_udp;
            (13w0, 8w132): parse_sctp;
            (13w0, 8w58): parse_icmp;
            (13w0, 8w0): parse_ext2_opt;
            (13w0, 8w43): parse_ext2_opt;
            (13w0, 8w60): parse_ext2_opt;
            (13w0, 8w44): parse_ext2_frag;
            default: accept;
        }
    }

    state parse_ext2_opt {
        packet.extract(hdr.ext2_nh);
        packet.extract(hdr.ext2_len);
        packet.extract(hdr.ext2_opt, ((bit<32>)hdr.ext2_len.hdr_ext_len << 32w6) + 32w48);
        transition select(hdr.ext2_nh.next_hdr) {
            8w6: parse_tcp;
            8w17: parse_udp;
            8w132: parse_sctp;
            8w58: parse_icmp;
            8w0: parse_ext3_opt;
            8w43: parse_ext3_opt;
            8w60: parse_ext3_opt;
            8w44: parse_ext3_frag;
            default: accept;
        }
    }

    state parse_ext2_frag {
        packet.extract(hdr.ext2_nh);
        packet.extract(hdr.ext2_len);
        packet.extract(hdr.ext2_frag);
        packet.extract(hdr.ext2_id);
        transition select(hdr.ext2_frag.frag_offset, hdr.ext2_nh.next_hdr) {
            (13w0, 8w6): parse_tcp;
            (13w0, 8w17): parse_udp;
            (13w0, 8w132): parse_sctp;
            (13w0, 8w58): parse_icmp;
            (13w0, 8w0): parse_ext3_opt;
            (13w0, 8w43): parse_ext3_opt;
            (13w0, 8w60): parse_ext3_opt;
            (13w0, 8w44): parse_ext3_frag;
            default: accept;
        }
    }

    state parse_ext3_opt {
        packet.extract(hdr.ext3_nh);
        packet.extract(hdr.ext3_len);
        packet.extract(hdr.ext3_opt, ((bit<32>)hdr.ext3_len.hdr_ext_len << 32w6) + 32w48);
        transition select(hdr.ext3_nh.next_hdr) {
            8w6: parse_tcp;
            8w17: parse_udp;
            8w132: parse_sctp;
            8w58: parse_icmp;
            8w0: parse_ext4_opt;
            8w43: parse_ext4_opt;
            8w60: parse_ext4_opt;
            8w44: parse_ext4_frag;
            default: accept;
        }
    }

    state parse_ext3_frag {
        packet.extract(hdr.ext3_nh);
        packet.extract(hdr.ext3_len);
        packet.extract(hdr.ext3_frag);
        packet.extract(hdr.ext3_id);
        transition select(hdr.ext3_frag.frag_offset, hdr.ext3_nh.next_hdr) {
            (13w0, 8w6): parse_tcp;
            (13w0, 8w17): parse_udp;
            (13w0, 8w132): parse_sctp;
            (13w0, 8w58): parse_icmp;
            (13w0, 8w0): parse_ext4_opt;
            (13w0, 8w43): parse_ext4_opt;
            (13w0, 8w60): parse_ext4_opt;
            (13w0, 8w44): parse_ext4_frag;
            default: accept;
        }
    }

    state parse_ext4_opt {
        packet.extract(hdr.ext4_nh);
        packet.extract(hdr.ext4_len);
        packet.extract(hdr.ext4_opt, ((bit<32>)hdr.ext4_len.hdr_ext_len << 32w6) + 32w48);
        transition select(hdr.ext4_nh.next_hdr) {
            8w6: parse_tcp;
            8w17: parse_udp;
            8w132: parse_sctp;
            8w58: parse_icmp;
            8w0: parse_ext5_opt;
            8w43: parse_ext5_opt;
            8w60: parse_ext5_opt;
            8w44: parse_ext5_frag;
            default: accept;
        }
    }

    state parse_ext4_frag {
        packet.extract(hdr.ext4_nh);
        packet.extract(hdr.ext4_len);
        packet.extract(hdr.ext4_frag);
        packet.extract(hdr.ext4_id);
        transition select(hdr.ext4_frag.frag_offset, hdr.ext4_nh.next_hdr) {
            (13w0, 8w6): parse_tcp;
            (13w0, 8w17): parse_udp;
            (13w0, 8w132): parse_sctp;
            (13w0, 8w58): parse_icmp;
            (13w0, 8w0): parse_ext5_opt;
            (13w0, 8w43): parse_ext5_opt;
            (13w0, 8w60): parse_ext5_opt;
            (13w0, 8w44): parse_ext5_frag;
            default: accept;
        }
    }

    state parse_ext5_opt {
        packet.extract(hdr.ext5_nh);
        packet.extract(hdr.ext5_len);
        packet.extract(hdr.ext5_opt, ((bit<32>)hdr.ext5_len.hdr_ext_len << 32w6) + 32w48);
        transition select(hdr.ext5_nh.next_hdr) {
            8w6: parse_tcp;
            8w17: parse_udp;
            8w132: parse_sctp;
            8w58: parse_icmp;
            8w0: parse_ext6_opt;
            8w43: parse_ext6_opt;
            8w60: parse_ext6_opt;
            8w44: parse_ext6_frag;
            default: accept;
        }
    }

    state parse_ext5_frag {
        packet.extract(hdr.ext5_nh);
        packet.extract(hdr.ext5_len);
        packet.extract(hdr.ext5_frag);
        packet.extract(hdr.ext5_id);
        transition select(hdr.ext5_frag.frag_offset, hdr.ext5_nh.next_hdr) {
            (13w0, 8w6): parse_tcp;
            (13w0, 8w17): parse_udp;
            (13w0, 8w132): parse_sctp;
            (13w0, 8w58): parse_icmp;
            (13w0, 8w0): parse_ext6_opt;
            (13w0, 8w43): parse_ext6_opt;
            (13w0, 8w60): parse_ext6_opt;
            (13w0, 8w44): parse_ext6_frag;
            default: accept;
        }
    }

    state parse_ext6_opt {
        packet.extract(hdr.ext6_nh);
        packet.extract(hdr.ext6_len);
        packet.extract(hdr.ext6_opt, ((bit<32>)hdr.ext6_len.hdr_ext_len << 32w6) + 32w48);
        transition select(hdr.ext6_nh.next_hdr) {
            8w6: parse_tcp;
            8w17: parse_udp;
            8w132: parse_sctp;
            8w58: parse_icmp;
            8w0: parse_ext7_opt;
            8w43: parse_ext7_opt;
            8w60: parse_ext7_opt;
            8w44: parse_ext7_frag;
            default: accept;
        }
    }

    state parse_ext6_frag {
        packet.extract(hdr.ext6_nh);
        packet.extract(hdr.ext6_len);
        packet.extract(hdr.ext6_frag);
        packet.extract(hdr.ext6_id);
        transition select(hdr.ext6_frag.frag_offset, hdr.ext6_nh.next_hdr) {
            (13w0, 8w6): parse_tcp;
            (13w0, 8w17): parse_udp;
            (13w0, 8w132): parse_sctp;
            (13w0, 8w58): parse_icmp;
            (13w0, 8w0): parse_ext7_opt;
            (13w0, 8w43): parse_ext7_opt;
            (13w0, 8w60): parse_ext7_opt;
            (13w0, 8w44): parse_ext7_frag;
            default: accept;
        }
    }

    state parse_ext7_opt {
        packet.extract(hdr.ext7_nh);
        packet.extract(hdr.ext7_len);
        packet.extract(hdr.ext7_opt, ((bit<32>)hdr.ext7_len.hdr_ext_len << 32w6) + 32w48);
        transition select(hdr.ext7_nh.next_hdr) {
            8w6: parse_tcp;
            8w17: parse_udp;
            8w132: parse_sctp;
            8w58: parse_icmp;
            default: accept;
        }
    }

    state parse_ext7_frag {
        packet.extract(hdr.ext7_nh);
        packet.extract(hdr.ext7_len);
        packet.extract(hdr.ext7_frag);
        packet.extract(hdr.ext7_id);
        transition select(hdr.ext7_frag.frag_offset, hdr.ext7_nh.next_hdr) {
            (13w0, 8w6): parse_tcp;
            (13w0, 8w17): parse_udp;
            (13w0, 8w132): parse_sctp;
            (13w0, 8w58): parse_icmp;
            default: accept;
        }
    }

    state parse_arp {
        packet.extract(hdr.arp_fixed);
        packet.extract(hdr.arp_sha);
        packet.extract(hdr.arp_spa);
        packet.extract(hdr.arp_tha);
        packet.extract(hdr.arp_tpa);
        transition accept;
    }

    state parse_tcp {
        packet.extract(hdr.l4_sport);
        packet.extract(hdr.l4_dport);
        packet.extract(hdr.tcp_seq);
        packet.extract(hdr.tcp_ack);
        packet.extract(hdr.tcp_off);
        packet.extract(hdr.tcp_flags);
        packet.extract(hdr.tcp_win);
        packet.extract(hdr.tcp_csum);
        packet.extract(hdr.tcp_urg);
        transition accept;
    }

    state parse_udp {
        packet.extract(hdr.l4_sport);
        packet.extract(hdr.l4_dport);
        packet.extract(hdr.udp_len);
        packet.extract(hdr.udp_csum);
        transition accept;
    }

    state parse_sctp {
        packet.extract(hdr.l4_sport);
        packet.extract(hdr.l4_dport);
        transition accept;
    }

    state parse_icmp {
        packet.extract(hdr.icmp_type);
        packet.extract(hdr.icmp_code);
        packet.extract(hdr.icmp_csum);
        transition accept;
    }

    state parse_udp_at4 {
        packet.extract(hdr.udp_len);
        packet.extract(hdr.udp_csum);
        transition accept;
    }

    state parse_tcp_at4 {
        packet.extract(hdr.tcp_seq);
        packet.extract(hdr.tcp_ack);
        packet.extract(hdr.tcp_off);
        packet.extract(hdr.tcp_flags);
        packet.extract(hdr.tcp_win);
        packet.extract(hdr.tcp_csum);
        packet.extract(hdr.tcp_urg);
        transition accept;
    }

    state parse_tcp_at8 {
        packet.extract(hdr.tcp_ack);
        packet.extract(hdr.tcp_off);
        packet.extract(hdr.tcp_flags);
        packet.extract(hdr.tcp_win);
        packet.extract(hdr.tcp_csum);
        packet.extract(hdr.tcp_urg);
        transition accept;
    }

    state parse_tcp_at12 {
        packet.extract(hdr.tcp_off);
        packet.extract(hdr.tcp_flags);
        packet.extract(hdr.tcp_win);
        packet.extract(hdr.tcp_csum);
        packet.extract(hdr.tcp_urg);
        transition accept;
    }

    state parse_tcp_at16 {
        packet.extract(hdr.tcp_csum);
        packet.extract(hdr.tcp_urg);
        transition accept;
    }
}

control ffpf_verify(inout headers_t hdr, inout metadata_t meta) {
    apply {
    }
}

control ffpf_ingress(inout headers_t hdr, inout metadata_t meta, inout standard_metadata_t standard_metadata) {
    register<bit<64>>(32w1024) f_1_row0;
    register<bit<64>>(32w1024) f_1_row1;
    counter(32w1, CounterType.packets) f_1_nokey;
    counter(32w1, CounterType.packets) f_1_missing;
    counter(32w1, CounterType.packets) f_1_changes;

    action ffpf_upper0() {
        meta.ffpf_proto6 = hdr.ipv6_nh.next_hdr;
        meta.ffpf_l4ok6 = 1w1;
        meta.ffpf_l4len6 = meta.ffpf_lim6 >= 32w40 ? meta.ffpf_lim6 - 32w40 : 32w0;
    }

    action ffpf_stop0() {
        meta.ffpf_proto6 = hdr.ipv6_nh.next_hdr;
        meta.ffpf_l4ok6 = 1w0;
        meta.ffpf_l4len6 = 32w0;
    }

    action ffpf_later0() {
        meta.ffpf_proto6 = hdr.ext0_nh.next_hdr;
        meta.ffpf_l4ok6 = 1w0;
        meta.ffpf_l4len6 = 32w0;
    }

    action ffpf_upper1() {
        meta.ffpf_proto6 = hdr.ext0_nh.next_hdr;
        meta.ffpf_l4ok6 = 1w1;
        meta.ffpf_l4len6 = meta.ffpf_lim6 >= meta.ffpf_c0 + 32w40 ? meta.ffpf_lim6 - (meta.ffpf_c0 + 32w40) : 32w0;
    }

    action ffpf_stop1() {
        meta.ffpf_proto6 = hdr.ext0_nh.next_hdr;
        meta.ffpf_l4ok6 = 1w0;
        meta.ffpf_l4len6 = 32w0;
    }

    action ffpf_later1() {
        meta.ffpf_proto6 = hdr.ext1_nh.next_hdr;
        meta.ffpf_l4ok6 = 1w0;
        meta.ffpf_l4len6 = 32w0;
    }

    action ffpf_upper2() {
        meta.ffpf_proto6 = hdr.ext1_nh.next_hdr;
        meta.ffpf_l4ok6 = 1w1;
        meta.ffpf_l4len6 = meta.ffpf_lim6 >= meta.ffpf_c1 + 32w40 ? meta.ffpf_lim6 - (meta.ffpf_c1 + 32w40) : 32w0;
    }

    action ffpf_stop2() {
        meta.ffpf_proto6 = hdr.ext1_nh.next_hdr;
        meta.ffpf_l4ok6 = 1w0;
        meta.ffpf_l4len6 = 32w0;
    }

    action ffpf_later2() {
        meta.ffpf_proto6 = hdr.ext2_nh.next_hdr;
        meta.ffpf_l4ok6 = 1w0;
        meta.ffpf_l4len6 = 32w0;
    }

    action ffpf_upper3() {
        meta.ffpf_proto6 = hdr.ext2_nh.next_hdr;
        meta.ffpf_l4ok6 = 1w1;
        meta.ffpf_l4len6 = meta.ffpf_lim6 >= meta.ffpf_c2 + 32w40 ? meta.ffpf_lim6 - (meta.ffpf_c2 + 32w40) : 32w0;
    }

    action ffpf_stop3() {
        meta.ffpf_proto6 = hdr.ext2_nh.next_hdr;
        meta.ffpf_l4ok6 = 1w0;
        meta.ffpf_l4len6 = 32w0;
    }

    action ffpf_later3() {
        meta.ffpf_proto6 = hdr.ext3_nh.next_hdr;
        meta.ffpf_l4ok6 = 1w0;
        meta.ffpf_l4len6 = 32w0;
    }

    action ffpf_upper4() {
        meta.ffpf_proto6 = hdr.ext3_nh.next_hdr;
        meta.ffpf_l4ok6 = 1w1;
        meta.ffpf_l4len6 = meta.ffpf_lim6 >= meta.ffpf_c3 + 32w40 ? meta.ffpf_lim6 - (meta.ffpf_c3 + 32w40) : 32w0;
    }

    action ffpf_stop4() {
        meta.ffpf_proto6 = hdr.ext3_nh.next_hdr;
        meta.ffpf_l4ok6 = 1w0;
        meta.ffpf_l4len6 = 32w0;
    }

    action ffpf_later4() {
        meta.ffpf_proto6 = hdr.ext4_nh.next_hdr;
        meta.ffpf_l4ok6 = 1w0;
        meta.ffpf_l4len6 = 32w0;
    }

    action ffpf_upper5() {
        meta.ffpf_proto6 = hdr.ext4_nh.next_hdr;
        meta.ffpf_l4ok6 = 1w1;
        meta.ffpf_l4len6 = meta.ffpf_lim6 >= meta.ffpf_c4 + 32w40 ? meta.ffpf_lim6 - (meta.ffpf_c4 + 32w40) : 32w0;
    }

    action ffpf_stop5() {
        meta.ffpf_proto6 = hdr.ext4_nh.next_hdr;
        meta.ffpf_l4ok6 = 1w0;
        meta.ffpf_l4len6 = 32w0;
    }

    action ffpf_later5() {
        meta.ffpf_proto6 = hdr.ext5_nh.next_hdr;
        meta.ffpf_l4ok6 = 1w0;
        meta.ffpf_l4len6 = 32w0;
    }

    action ffpf_upper6() {
        meta.ffpf_proto6 = hdr.ext5_nh.next_hdr;
        meta.ffpf_l4ok6 = 1w1;
        meta.ffpf_l4len6 = meta.ffpf_lim6 >= meta.ffpf_c5 + 32w40 ? meta.ffpf_lim6 - (meta.ffpf_c5 + 32w40) : 32w0;
    }

    action ffpf_stop6() {
        meta.ffpf_proto6 = hdr.ext5_nh.next_hdr;
        meta.ffpf_l4ok6 = 1w0;
        meta.ffpf_l4len6 = 32w0;
    }

    action ffpf_later6() {
        meta.ffpf_proto6 = hdr.ext6_nh.next_hdr;
        meta.ffpf_l4ok6 = 1w0;
        meta.ffpf_l4len6 = 32w0;
    }

    action ffpf_upper7() {
        meta.ffpf_proto6 = hdr.ext6_nh.next_hdr;
        meta.ffpf_l4ok6 = 1w1;
        meta.ffpf_l4len6 = meta.ffpf_lim6 >= meta.ffpf_c6 + 32w40 ? meta.ffpf_lim6 - (meta.ffpf_c6 + 32w40) : 32w0;
    }

    action ffpf_stop7() {
        meta.ffpf_proto6 = hdr.ext6_nh.next_hdr;
        meta.ffpf_l4ok6 = 1w0;
        meta.ffpf_l4len6 = 32w0;
    }

    action ffpf_later7() {
        meta.ffpf_proto6 = hdr.ext7_nh.next_hdr;
        meta.ffpf_l4ok6 = 1w0;
        meta.ffpf_l4len6 = 32w0;
    }

    action ffpf_upper8() {
        meta.ffpf_proto6 = hdr.ext7_nh.next_hdr;
        meta.ffpf_l4ok6 = 1w1;
        meta.ffpf_l4len6 = meta.ffpf_lim6 >= meta.ffpf_c7 + 32w40 ? meta.ffpf_lim6 - (meta.ffpf_c7 + 32w40) : 32w0;
    }

    action ffpf_stop8() {
        meta.ffpf_proto6 = hdr.ext7_nh.next_hdr;
        meta.ffpf_l4ok6 = 1w0;
        meta.ffpf_l4len6 = 32w0;
    }

    table ffpf_walk {
        key = {
            meta.ffpf_ext0: ternary;
            meta.ffpf_ext1: ternary;
            meta.ffpf_ext2: ternary;
            meta.ffpf_ext3: ternary;
            meta.ffpf_ext4: ternary;
            meta.ffpf_ext5: ternary;
            meta.ffpf_ext6: ternary;
            meta.ffpf_ext7: ternary;
            meta.ffpf_ext8: ternary;
            meta.ffpf_bad0: ternary;
            meta.ffpf_later0: ternary;
            meta.ffpf_bad1: ternary;
            meta.ffpf_later1: ternary;
            meta.ffpf_bad2: ternary;
            meta.ffpf_later2: ternary;
            meta.ffpf_bad3: ternary;
            meta.ffpf_later3: ternary;
            meta.ffpf_bad4: ternary;
            meta.ffpf_later4: ternary;
            meta.ffpf_bad5: ternary;
            meta.ffpf_later5: ternary;
            meta.ffpf_bad6: ternary;
            meta.ffpf_later6: ternary;
            meta.ffpf_bad7: ternary;
            meta.ffpf_later7: ternary;
        }
        actions = {
            ffpf_upper0;
            ffpf_stop0;
            ffpf_later0;
            ffpf_upper1;
            ffpf_stop1;
            ffpf_later1;
            ffpf_upper2;
            ffpf_stop2;
            ffpf_later2;
            ffpf_upper3;
            ffpf_stop3;
            ffpf_later3;
            ffpf_upper4;
            ffpf_stop4;
            ffpf_later4;
            ffpf_upper5;
            ffpf_stop5;
            ffpf_later5;
            ffpf_upper6;
            ffpf_stop6;
            ffpf_later6;
            ffpf_upper7;
            ffpf_stop7;
            ffpf_later7;
            ffpf_upper8;
            ffpf_stop8;
        }
        default_action = ffpf_upper0();
        size = 27;
        const entries = {
            (1w0, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _): ffpf_upper0();
            (1w1, _, _, _, _, _, _, _, _, 1w1, _, _, _, _, _, _, _, _, _, _, _, _, _, _, _): ffpf_stop0();
            (1w1, _, _, _, _, _, _, _, _, 1w0, 1w1, _, _, _, _, _, _, _, _, _, _, _, _, _, _): ffpf_later0();
            (1w1, 1w0, _, _, _, _, _, _, _, 1w0, 1w0, _, _, _, _, _, _, _, _, _, _, _, _, _, _): ffpf_upper1();
            (1w1, 1w1, _, _, _, _, _, _, _, 1w0, 1w0, 1w1, _, _, _, _, _, _, _, _, _, _, _, _, _): ffpf_stop1();
            (1w1, 1w1, _, _, _, _, _, _, _, 1w0, 1w0, 1w0, 1w1, _, _, _, _, _, _, _, _, _, _, _, _): ffpf_later1();
            (1w1, 1w1, 1w0, _, _, _, _, _, _, 1w0, 1w0, 1w0, 1w0, _, _, _, _, _, _, _, _, _, _, _, _): ffpf_upper2();
            (1w1, 1w1, 1w1, _, _, _, _, _, _, 1w0, 1w0, 1w0, 1w0, 1w1, _, _, _, _, _, _, _, _, _, _, _): ffpf_stop2();
            (1w1, 1w1, 1w1, _, _, _, _, _, _, 1w0, 1w0, 1w0, 1w0, 1w0, 1w1, _, _, _, _, _, _, _, _, _, _): ffpf_later2();
            (1w1, 1w1, 1w1, 1w0, _, _, _, _, _, 1w0, 1w0, 1w0, 1w0, 1w0, 1w0, _, _, _, _, _, _, _, _, _, _): ffpf_upper3();
            (1w1, 1w1, 1w1, 1w1, _, _, _, _, _, 1w0, 1w0, 1w0, 1w0, 1w0, 1w0, 1w1, _, _, _, _, _, _, _, _, _): ffpf_stop3();
            (1w1, 1w1, 1w1, 1w1, _, _, _, _, _, 1w0, 1w0, 1w0, 1w0, 1w0, 1w0, 1w0, 1w1, _, _, _, _, _, _, _, _): ffpf_later3();
            (1w1, 1w1, 1w1, 1w1, 1w0, _, _, _, _, 1w0, 1w0, 1w0, 1w0, 1w0, 1w0, 1w0, 1w0, _, _, _, _, _, _, _, _): ffpf_upper4();
            (1w1, 1w1, 1w1, 1w1, 1w1, _, _, _, _, 1w0, 1w0, 1w0, 1w0, 1w0, 1w0, 1w0, 1w0, 1w1, _, _, _, _, _, _, _): ffpf_stop4();
            (1w1, 1w1, 1w1, 1w1, 1w1, _, _, _, _, 1w0, 1w0, 1w0, 1w0, 1w0, 1w0, 1w0, 1w0, 1w0, 1w1, _, _, _, _, _, _): ffpf_later4();
            (1w1, 1w1, 1w1, 1w1, 1w1, 1w0, _, _, _, 1w0, 1w0, 1w0, 1w0, 1w0, 1w0, 1w0, 1w0, 1w0, 1w0, _, _, _, _, _, _): ffpf_upper5();
            (1w1, 1w1, 1w1, 1w1, 1w1, 1w1, _, _, _, 1w0, 1w0, 1w0, 1w0, 1w0, 1w0, 1w0, 1w0, 1w0, 1w0, 1w1, _, _, _, _, _): ffpf_stop5();
            (1w1, 1w1, 1w1, 1w1, 1w1, 1w1, _, _, _, 1w0, 1w0, 1w0, 1w0, 1w0, 1w0, 1w0, 1w0, 1w0, 1w0, 1w0, 1w1, _, _, _, _): ffpf_later5();
            (1w1, 1w1, 1w1, 1w1, 1w1, 1w1, 1w0, _, _, 1w0, 1w0, 1w0, 1w0, 1w0, 1w0, 1w0, 1w0, 1w0, 1w0, 1w0, 1w0, _, _, _, _): ffpf_upper6();
            (1w1, 1w1, 1w1, 1w1, 1w1, 1w1, 1w1, _, _, 1w0, 1w0, 1w0, 1w0, 1w0, 1w0, 1w0, 1w0, 1w0, 1w0, 1w0, 1w0, 1w1, _, _, _): ffpf_stop6();
            (1w1, 1w1, 1w1, 1w1, 1w1, 1w1, 1w1, _, _, 1w0, 1w0, 1w0, 1w0, 1w0, 1w0, 1w0, 1w0, 1w0, 1w0, 1w0, 1w0, 1w0, 1w1, _, _): ffpf_later6();
            (1w1, 1w1, 1w1, 1w1, 1w1, 1w1, 1w1, 1w0, _, 1w0, 1w0, 1w0, 1w0, 1w0, 1w0, 1w0, 1w0, 1w0, 1w0, 1w0, 1w0, 1w0, 1w0, _, _): ffpf_upper7();
            (1w1, 1w1, 1w1, 1w1, 1w1, 1w1, 1w1, 1w1, _, 1w0, 1w0, 1w0, 1w0, 1w0, 1w0, 1w0, 1w0, 1w0, 1w0, 1w0, 1w0, 1w0, 1w0, 1w1, _): ffpf_stop7();
            (1w1, 1w1, 1w1, 1w1, 1w1, 1w1, 1w1, 1w1, _, 1w0, 1w0, 1w0, 1w0, 1w0, 1w0, 1w0, 1w0, 1w0, 1w0, 1w0, 1w0, 1w0, 1w0, 1w0, 1w1): ffpf_later7();
            (1w1, 1w1, 1w1, 1w1, 1w1, 1w1, 1w1, 1w1, 1w0, 1w0, 1w0, 1w0, 1w0, 1w0, 1w0, 1w0, 1w0, 1w0, 1w0, 1w0, 1w0, 1w0, 1w0, 1w0, 1w0): ffpf_upper8();
            (1w1, 1w1, 1w1, 1w1, 1w1, 1w1, 1w1, 1w1, 1w1, 1w0, 1w0, 1w0, 1w0, 1w0, 1w0, 1w0, 1w0, 1w0, 1w0, 1w0, 1w0, 1w0, 1w0, 1w0, 1w0): ffpf_stop8();
        }
    }

    apply {
        meta.ffpf_v4 = (bit<1>)(hdr.ipv4_dst_2.isValid() && hdr.ipv4_vihl.version == 4w4 && hdr.ipv4_vihl.ihl >= 4w5 && (hdr.ipv4_len.total_len == 16w0 || hdr.ipv4_len.total_len >= (bit<16>)hdr.ipv4_vihl.ihl << 16w2));
        meta.ffpf_v6 = (bit<1>)(hdr.ipv6_dst_4.isValid() && hdr.ipv6_vtf.version == 4w6);
        meta.ffpf_l3 = 32w14 + (hdr.vlan0_type.isValid() ? 32w4 : 32w0) + (hdr.vlan1_type.isValid() ? 32w4 : 32w0) + (hdr.vlan2_type.isValid() ? 32w4 : 32w0) + (hdr.vlan3_type.isValid() ? 32w4 : 32w0);
        meta.ffpf_ext0 = (bit<1>)(hdr.ipv6_nh.next_hdr == 8w0 || hdr.ipv6_nh.next_hdr == 8w43 || hdr.ipv6_nh.next_hdr == 8w60 || hdr.ipv6_nh.next_hdr == 8w44);
        meta.ffpf_frag0 = (bit<1>)(hdr.ipv6_nh.next_hdr == 8w44);
        meta.ffpf_later0 = (bit<1>)(hdr.ext0_frag.isValid() && hdr.ext0_frag.frag_offset != 13w0);
        meta.ffpf_sz0 = hdr.ipv6_nh.next_hdr == 8w44 ? 32w8 : (bit<32>)hdr.ext0_len.hdr_ext_len + 32w1 << 32w3;
        meta.ffpf_ext1 = (bit<1>)(hdr.ext0_nh.next_hdr == 8w0 || hdr.ext0_nh.next_hdr == 8w43 || hdr.ext0_nh.next_hdr == 8w60 || hdr.ext0_nh.next_hdr == 8w44);
        meta.ffpf_frag1 = (bit<1>)(hdr.ext0_nh.next_hdr == 8w44);
        meta.ffpf_later1 = (bit<1>)(hdr.ext1_frag.isValid() && hdr.ext1_frag.frag_offset != 13w0);
        meta.ffpf_sz1 = hdr.ext0_nh.next_hdr == 8w44 ? 32w8 : (bit<32>)hdr.ext1_len.hdr_ext_len + 32w1 << 32w3;
        meta.ffpf_ext2 = (bit<1>)(hdr.ext1_nh.next_hdr == 8w0 || hdr.ext1_nh.next_hdr == 8w43 || hdr.ext1_nh.next_hdr == 8w60 || hdr.ext1_nh.next_hdr == 8w44);
        meta.ffpf_frag2 = (bit<1>)(hdr.ext1_nh.next_hdr == 8w44);
        meta.ffpf_later2 = (bit<1>)(hdr.ext2_frag.isValid() && hdr.ext2_frag.frag_offset != 13w0);
        meta.ffpf_sz2 = hdr.ext1_nh.next_hdr == 8w44 ? 32w8 : (bit<32>)hdr.ext2_len.hdr_ext_len + 32w1 << 32w3;
        meta.ffpf_ext3 = (bit<1>)(hdr.ext2_nh.next_hdr == 8w0 || hdr.ext2_nh.next_hdr == 8w43 || hdr.ext2_nh.next_hdr == 8w60 || hdr.ext2_nh.next_hdr == 8w44);
        meta.ffpf_frag3 = (bit<1>)(hdr.ext2_nh.next_hdr == 8w44);
        meta.ffpf_later3 = (bit<1>)(hdr.ext3_frag.isValid() && hdr.ext3_frag.frag_offset != 13w0);
        meta.ffpf_sz3 = hdr.ext2_nh.next_hdr == 8w44 ? 32w8 : (bit<32>)hdr.ext3_len.hdr_ext_len + 32w1 << 32w3;
        meta.ffpf_ext4 = (bit<1>)(hdr.ext3_nh.next_hdr == 8w0 || hdr.ext3_nh.next_hdr == 8w43 || hdr.ext3_nh.next_hdr == 8w60 || hdr.ext3_nh.next_hdr == 8w44);
        meta.ffpf_frag4 = (bit<1>)(hdr.ext3_nh.next_hdr == 8w44);
        meta.ffpf_later4 = (bit<1>)(hdr.ext4_frag.isValid() && hdr.ext4_frag.frag_offset != 13w0);
        meta.ffpf_sz4 = hdr.ext3_nh.next_hdr == 8w44 ? 32w8 : (bit<32>)hdr.ext4_len.hdr_ext_len + 32w1 << 32w3;
        meta.ffpf_ext5 = (bit<1>)(hdr.ext4_nh.next_hdr == 8w0 || hdr.ext4_nh.next_hdr == 8w43 || hdr.ext4_nh.next_hdr == 8w60 || hdr.ext4_nh.next_hdr == 8w44);
        meta.ffpf_frag5 = (bit<1>)(hdr.ext4_nh.next_hdr == 8w44);
        meta.ffpf_later5 = (bit<1>)(hdr.ext5_frag.isValid() && hdr.ext5_frag.frag_offset != 13w0);
        meta.ffpf_sz5 = hdr.ext4_nh.next_hdr == 8w44 ? 32w8 : (bit<32>)hdr.ext5_len.hdr_ext_len + 32w1 << 32w3;
        meta.ffpf_ext6 = (bit<1>)(hdr.ext5_nh.next_hdr == 8w0 || hdr.ext5_nh.next_hdr == 8w43 || hdr.ext5_nh.next_hdr == 8w60 || hdr.ext5_nh.next_hdr == 8w44);
        meta.ffpf_frag6 = (bit<1>)(hdr.ext5_nh.next_hdr == 8w44);
        meta.ffpf_later6 = (bit<1>)(hdr.ext6_frag.isValid() && hdr.ext6_frag.frag_offset != 13w0);
        meta.ffpf_sz6 = hdr.ext5_nh.next_hdr == 8w44 ? 32w8 : (bit<32>)hdr.ext6_len.hdr_ext_len + 32w1 << 32w3;
        meta.ffpf_ext7 = (bit<1>)(hdr.ext6_nh.next_hdr == 8w0 || hdr.ext6_nh.next_hdr == 8w43 || hdr.ext6_nh.next_hdr == 8w60 || hdr.ext6_nh.next_hdr == 8w44);
        meta.ffpf_frag7 = (bit<1>)(hdr.ext6_nh.next_hdr == 8w44);
        meta.ffpf_later7 = (bit<1>)(hdr.ext7_frag.isValid() && hdr.ext7_frag.frag_offset != 13w0);
        meta.ffpf_sz7 = hdr.ext6_nh.next_hdr == 8w44 ? 32w8 : (bit<32>)hdr.ext7_len.hdr_ext_len + 32w1 << 32w3;
        meta.ffpf_ext8 = (bit<1>)(hdr.ext7_nh.next_hdr == 8w0 || hdr.ext7_nh.next_hdr == 8w43 || hdr.ext7_nh.next_hdr == 8w60 || hdr.ext7_nh.next_hdr == 8w44);
        meta.ffpf_cap = standard_metadata.packet_length - meta.ffpf_l3;
        meta.ffpf_a0 = meta.ffpf_sz0;
        meta.ffpf_a1 = meta.ffpf_sz1 + meta.ffpf_sz0;
        meta.ffpf_a2 = meta.ffpf_sz2 + meta.ffpf_sz1;
        meta.ffpf_a3 = meta.ffpf_sz3 + meta.ffpf_sz2;
        meta.ffpf_a4 = meta.ffpf_sz4 + meta.ffpf_sz3;
        meta.ffpf_a5 = meta.ffpf_sz5 + meta.ffpf_sz4;
        meta.ffpf_a6 = meta.ffpf_sz6 + meta.ffpf_sz5;
        meta.ffpf_a7 = meta.ffpf_sz7 + meta.ffpf_sz6;
        meta.ffpf_lim4 = hdr.ipv4_len.total_len == 16w0 || (bit<32>)hdr.ipv4_len.total_len > meta.ffpf_cap ? meta.ffpf_cap : (bit<32>)hdr.ipv4_len.total_len;
        meta.ffpf_lim6 = hdr.ipv6_plen.payload_len != 16w0 && (bit<32>)hdr.ipv6_plen.payload_len + 32w40 < meta.ffpf_cap ? (bit<32>)hdr.ipv6_plen.payload_len + 32w40 : meta.ffpf_cap;
        meta.ffpf_b0 = meta.ffpf_a0;
        meta.ffpf_b1 = meta.ffpf_a1;
        meta.ffpf_b2 = meta.ffpf_a2 + meta.ffpf_a0;
        meta.ffpf_b3 = meta.ffpf_a3 + meta.ffpf_a1;
        meta.ffpf_b4 = meta.ffpf_a4 + meta.ffpf_a2;
        meta.ffpf_b5 = meta.ffpf_a5 + meta.ffpf_a3;
        meta.ffpf_b6 = meta.ffpf_a6 + meta.ffpf_a4;
        meta.ffpf_b7 = meta.ffpf_a7 + meta.ffpf_a5;
        meta.ffpf_c0 = meta.ffpf_b0;
        meta.ffpf_c1 = meta.ffpf_b1;
        meta.ffpf_c2 = meta.ffpf_b2;
        meta.ffpf_c3 = meta.ffpf_b3;
        meta.ffpf_c4 = meta.ffpf_b4 + meta.ffpf_b0;
        meta.ffpf_c5 = meta.ffpf_b5 + meta.ffpf_b1;
        meta.ffpf_c6 = meta.ffpf_b6 + meta.ffpf_b2;
        meta.ffpf_c7 = meta.ffpf_b7 + meta.ffpf_b3;
        meta.ffpf_bad0 = (bit<1>)(32w40 + (meta.ffpf_frag0 == 1w1 ? 32w8 : 32w2) > meta.ffpf_lim6);
        meta.ffpf_bad1 = (bit<1>)(meta.ffpf_c0 + 32w40 + (meta.ffpf_frag1 == 1w1 ? 32w8 : 32w2) > meta.ffpf_lim6);
        meta.ffpf_bad2 = (bit<1>)(meta.ffpf_c1 + 32w40 + (meta.ffpf_frag2 == 1w1 ? 32w8 : 32w2) > meta.ffpf_lim6);
        meta.ffpf_bad3 = (bit<1>)(meta.ffpf_c2 + 32w40 + (meta.ffpf_frag3 == 1w1 ? 32w8 : 32w2) > meta.ffpf_lim6);
        meta.ffpf_bad4 = (bit<1>)(meta.ffpf_c3 + 32w40 + (meta.ffpf_frag4 == 1w1 ? 32w8 : 32w2) > meta.ffpf_lim6);
        meta.ffpf_bad5 = (bit<1>)(meta.ffpf_c4 + 32w40 + (meta.ffpf_frag5 == 1w1 ? 32w8 : 32w2) > meta.ffpf_lim6);
        meta.ffpf_bad6 = (bit<1>)(meta.ffpf_c5 + 32w40 + (meta.ffpf_frag6 == 1w1 ? 32w8 : 32w2) > meta.ffpf_lim6);
        meta.ffpf_bad7 = (bit<1>)(meta.ffpf_c6 + 32w40 + (meta.ffpf_frag7 == 1w1 ? 32w8 : 32w2) > meta.ffpf_lim6);
        meta.ffpf_l4len4 = meta.ffpf_lim4 >= (bit<32>)hdr.ipv4_vihl.ihl << 32w2 ? meta.ffpf_lim4 - ((bit<32>)hdr.ipv4_vihl.ihl << 32w2) : 32w0;
        ffpf_walk.apply();
        meta.f_1_haskey = (bit<1>)(hdr.eth_type.isValid() && (meta.ffpf_v4 == 1w1 ? 8w4 : (meta.ffpf_v6 == 1w1 ? 8w6 : 8w0)) != 8w0);
        meta.f_1_key0 = (bit<64>)(meta.ffpf_v4 == 1w1 ? 8w4 : (meta.ffpf_v6 == 1w1 ? 8w6 : 8w0)) << 64w0 | (bit<64>)(meta.ffpf_v4 == 1w1 ? hdr.ipv4_proto.protocol : meta.ffpf_proto6) << 64w8 | ((meta.ffpf_v4 == 1w1 ? 8w4 : (meta.ffpf_v6 == 1w1 ? 8w6 : 8w0)) != 8w0 && (meta.ffpf_v4 == 1w1 ? hdr.ipv4_frag.frag_offset == 13w0 : meta.ffpf_l4ok6 == 1w1) && ((meta.ffpf_v4 == 1w1 ? hdr.ipv4_proto.protocol : meta.ffpf_proto6) == 8w6 || (meta.ffpf_v4 == 1w1 ? hdr.ipv4_proto.protocol : meta.ffpf_proto6) == 8w17 || (meta.ffpf_v4 == 1w1 ? hdr.ipv4_proto.protocol : meta.ffpf_proto6) == 8w132) && (meta.ffpf_v4 == 1w1 ? meta.ffpf_l4len4 : meta.ffpf_l4len6) >= 32w4 ? 64w2305843009213693952 | (bit<64>)hdr.l4_sport.src_port << 64w16 | (bit<64>)hdr.l4_dport.dst_port << 64w32 : 64w0);
        meta.f_1_key1 = (meta.ffpf_v4 == 1w1 ? 8w4 : (meta.ffpf_v6 == 1w1 ? 8w6 : 8w0)) == 8w4 ? (bit<64>)((bit<32>)hdr.ipv4_src_0.src_0 << 32w24 | (bit<32>)hdr.ipv4_src_1.src_1 << 32w16 | (bit<32>)hdr.ipv4_src_2.src_2) << 64w32 & 64w18446744069414584320 : ((meta.ffpf_v4 == 1w1 ? 8w4 : (meta.ffpf_v6 == 1w1 ? 8w6 : 8w0)) == 8w6 ? ((bit<64>)hdr.ipv6_src_0.src_0 << 64w32 | (bit<64>)hdr.ipv6_src_1.src_1) & 64w18446744073709551615 : 64w0);
        meta.f_1_key2 = (meta.ffpf_v4 == 1w1 ? 8w4 : (meta.ffpf_v6 == 1w1 ? 8w6 : 8w0)) == 8w6 ? ((bit<64>)hdr.ipv6_src_2.src_2 << 64w32 | (bit<64>)hdr.ipv6_src_3.src_3) & 64w18446744073709551615 : 64w0;
        meta.f_1_key3 = (meta.ffpf_v4 == 1w1 ? 8w4 : (meta.ffpf_v6 == 1w1 ? 8w6 : 8w0)) == 8w4 ? (bit<64>)((bit<32>)hdr.ipv4_dst_0.dst_0 << 32w24 | (bit<32>)hdr.ipv4_dst_1.dst_1 << 32w16 | (bit<32>)hdr.ipv4_dst_2.dst_2) << 64w32 & 64w18446744069414584320 : ((meta.ffpf_v4 == 1w1 ? 8w4 : (meta.ffpf_v6 == 1w1 ? 8w6 : 8w0)) == 8w6 ? ((bit<64>)hdr.ipv6_dst_0.dst_0 << 64w56 | (bit<64>)hdr.ipv6_dst_1.dst_1 << 64w32 | (bit<64>)hdr.ipv6_dst_2.dst_2) & 64w18446744073709551615 : 64w0);
        meta.f_1_key4 = (meta.ffpf_v4 == 1w1 ? 8w4 : (meta.ffpf_v6 == 1w1 ? 8w6 : 8w0)) == 8w6 ? ((bit<64>)hdr.ipv6_dst_3.dst_3 << 64w32 | (bit<64>)hdr.ipv6_dst_4.dst_4) & 64w18446744073709551615 : 64w0;
        meta.f_1_v = (bit<64>)hdr.ipv4_csum.hdr_checksum;
        hash(meta.f_1_h1, HashAlgorithm.crc32, 32w0, {meta.f_1_key0, meta.f_1_key1, meta.f_1_key2, meta.f_1_key3, meta.f_1_key4}, 33w4294967296);
        hash(meta.f_1_h2, HashAlgorithm.crc16, 16w0, {meta.f_1_key0, meta.f_1_key1, meta.f_1_key2, meta.f_1_key3, meta.f_1_key4}, 17w65536);
        meta.f_1_pos0 = (bit<32>)meta.f_1_h1[31:22];
        meta.f_1_pos1 = (bit<32>)(meta.f_1_h1 + ((bit<32>)meta.f_1_h2 << 32w16))[31:22];
        meta.f_1_stored = 1w0;
        meta.f_1_any = 1w0;
        meta.f_1_all = 1w0;
        if (meta.f_1_haskey == 1w1) {
            if ((meta.ffpf_v4 == 1w1 ? 8w4 : (meta.ffpf_v6 == 1w1 ? 8w6 : 8w0)) == 8w4) {
                {
                    bit<64> ffpf_old;
                    f_1_row0.read(ffpf_old, meta.f_1_pos0);
                    bit<64> ffpf_new = meta.f_1_v;
                    f_1_row0.write(meta.f_1_pos0, ffpf_new);
                    meta.f_1_old0 = ffpf_old;
                }
                {
                    bit<64> ffpf_old;
                    f_1_row1.read(ffpf_old, meta.f_1_pos1);
                    bit<64> ffpf_new = meta.f_1_v;
                    f_1_row1.write(meta.f_1_pos1, ffpf_new);
                    meta.f_1_old1 = ffpf_old;
                }
                meta.f_1_stored = 1w1;
                meta.f_1_any = (bit<1>)(meta.f_1_old0 == meta.f_1_v || meta.f_1_old1 == meta.f_1_v);
                meta.f_1_all = (bit<1>)(meta.f_1_old0 == meta.f_1_v && meta.f_1_old1 == meta.f_1_v);
                if (meta.f_1_any == 1w0) {
                    f_1_changes.count(32w0);
                }
            } else {
                f_1_missing.count(32w0);
            }
        } else {
            f_1_nokey.count(32w0);
        }
        if (true && (meta.f_1_stored == 1w1 && meta.f_1_any == 1w0)) {
            standard_metadata.egress_spec = 9w1;
        } else {
            mark_to_drop(standard_metadata);
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
        packet.emit(hdr.eth_dst_0);
        packet.emit(hdr.eth_dst_1);
        packet.emit(hdr.eth_src);
        packet.emit(hdr.eth_type);
        packet.emit(hdr.vlan0_tci);
        packet.emit(hdr.vlan0_type);
        packet.emit(hdr.vlan1_tci);
        packet.emit(hdr.vlan1_type);
        packet.emit(hdr.vlan2_tci);
        packet.emit(hdr.vlan2_type);
        packet.emit(hdr.vlan3_tci);
        packet.emit(hdr.vlan3_type);
        packet.emit(hdr.ipv4_vihl);
        packet.emit(hdr.ipv4_tos);
        packet.emit(hdr.ipv4_len);
        packet.emit(hdr.ipv4_id_0);
        packet.emit(hdr.ipv4_id_1);
        packet.emit(hdr.ipv4_frag);
        packet.emit(hdr.ipv4_ttl);
        packet.emit(hdr.ipv4_proto);
        packet.emit(hdr.ipv4_csum);
        packet.emit(hdr.ipv4_src_0);
        packet.emit(hdr.ipv4_src_1);
        packet.emit(hdr.ipv4_src_2);
        packet.emit(hdr.ipv4_dst_0);
        packet.emit(hdr.ipv4_dst_1);
        packet.emit(hdr.ipv4_dst_2);
        packet.emit(hdr.ipv4_opts);
        packet.emit(hdr.ipv6_vtf);
        packet.emit(hdr.ipv6_plen);
        packet.emit(hdr.ipv6_nh);
        packet.emit(hdr.ipv6_hlim);
        packet.emit(hdr.ipv6_src_0);
        packet.emit(hdr.ipv6_src_1);
        packet.emit(hdr.ipv6_src_2);
        packet.emit(hdr.ipv6_src_3);
        packet.emit(hdr.ipv6_dst_0);
        packet.emit(hdr.ipv6_dst_1);
        packet.emit(hdr.ipv6_dst_2);
        packet.emit(hdr.ipv6_dst_3);
        packet.emit(hdr.ipv6_dst_4);
        packet.emit(hdr.ext0_nh);
        packet.emit(hdr.ext0_len);
        packet.emit(hdr.ext0_opt);
        packet.emit(hdr.ext0_frag);
        packet.emit(hdr.ext0_id);
        packet.emit(hdr.ext1_nh);
        packet.emit(hdr.ext1_len);
        packet.emit(hdr.ext1_opt);
        packet.emit(hdr.ext1_frag);
        packet.emit(hdr.ext1_id);
        packet.emit(hdr.ext2_nh);
        packet.emit(hdr.ext2_len);
        packet.emit(hdr.ext2_opt);
        packet.emit(hdr.ext2_frag);
        packet.emit(hdr.ext2_id);
        packet.emit(hdr.ext3_nh);
        packet.emit(hdr.ext3_len);
        packet.emit(hdr.ext3_opt);
        packet.emit(hdr.ext3_frag);
        packet.emit(hdr.ext3_id);
        packet.emit(hdr.ext4_nh);
        packet.emit(hdr.ext4_len);
        packet.emit(hdr.ext4_opt);
        packet.emit(hdr.ext4_frag);
        packet.emit(hdr.ext4_id);
        packet.emit(hdr.ext5_nh);
        packet.emit(hdr.ext5_len);
        packet.emit(hdr.ext5_opt);
        packet.emit(hdr.ext5_frag);
        packet.emit(hdr.ext5_id);
        packet.emit(hdr.ext6_nh);
        packet.emit(hdr.ext6_len);
        packet.emit(hdr.ext6_opt);
        packet.emit(hdr.ext6_frag);
        packet.emit(hdr.ext6_id);
        packet.emit(hdr.ext7_nh);
        packet.emit(hdr.ext7_len);
        packet.emit(hdr.ext7_opt);
        packet.emit(hdr.ext7_frag);
        packet.emit(hdr.ext7_id);
        packet.emit(hdr.arp_fixed);
        packet.emit(hdr.arp_sha);
        packet.emit(hdr.arp_spa);
        packet.emit(hdr.arp_tha);
        packet.emit(hdr.arp_tpa);
        packet.emit(hdr.l4_sport);
        packet.emit(hdr.l4_dport);
        packet.emit(hdr.tcp_seq);
        packet.emit(hdr.tcp_ack);
        packet.emit(hdr.tcp_off);
        packet.emit(hdr.tcp_flags);
        packet.emit(hdr.tcp_win);
        packet.emit(hdr.tcp_csum);
        packet.emit(hdr.tcp_urg);
        packet.emit(hdr.udp_len);
        packet.emit(hdr.udp_csum);
        packet.emit(hdr.icmp_type);
        packet.emit(hdr.icmp_code);
        packet.emit(hdr.icmp_csum);
    }
}

V1Switch(ffpf_parser(), ffpf_verify(), ffpf_ingress(), ffpf_egress(), ffpf_compute(), ffpf_deparser()) main;
