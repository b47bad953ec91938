/* cellfabric fabric.p4 -- parser and IPv4 checksum verification. */
#ifndef _FABRIC_PARSER_P4_
#define _FABRIC_PARSER_P4_

#include "headers.p4"

parser MyParser(packet_in packet,
                out headers_t hdr,
                inout metadata_t meta,
                inout standard_metadata_t standard_metadata) {

    state start {
        transition select(standard_metadata.ingress_port) {
            CPU_PORT: parse_packet_out;
            default:  parse_ethernet;
        }
    }

    state parse_packet_out {
        packet.extract(hdr.packet_out);
        transition parse_ethernet;
    }

    state parse_ethernet {
        packet.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            ETHERTYPE_IPV4: parse_ipv4;
            ETHERTYPE_ARP:  parse_arp;
            default:        accept;
        }
    }

    state parse_arp {
        packet.extract(hdr.arp);
        transition accept;
    }

    state parse_ipv4 {
        packet.extract(hdr.ipv4);
        meta.ip_proto = hdr.ipv4.protocol;
        /* L4 only for option-less, unfragmented (or first-fragment) datagrams. */
        transition select(hdr.ipv4.ihl, hdr.ipv4.frag_offset, hdr.ipv4.protocol) {
            (4w5, 13w0, IP_PROTO_UDP): parse_udp;
            (4w5, 13w0, IP_PROTO_TCP): parse_tcp;
            default: accept;
        }
    }

    state parse_tcp {
        packet.extract(hdr.tcp);
        meta.l4_src_port = hdr.tcp.src_port;
        meta.l4_dst_port = hdr.tcp.dst_port;
        transition accept;
    }

    state parse_udp {
        packet.extract(hdr.udp);
        meta.l4_src_port = hdr.udp.src_port;
        meta.l4_dst_port = hdr.udp.dst_port;
        transition select(hdr.ipv4.dscp) {
            INT_DSCP: parse_int_shim;
            default:  parse_udp_payload;
        }
    }

    state parse_int_shim {
        packet.extract(hdr.int_shim);
        transition select(hdr.int_shim.int_type) {
            INT_TYPE_MD: parse_int_md;
            default:     accept;   /* other INT types are carried opaquely */
        }
    }

    state parse_int_md {
        packet.extract(hdr.int_md);
        meta.int_words_left = hdr.int_shim.len - INT_MD_WORDS;
        transition select(meta.int_words_left) {
            8w0:            parse_udp_payload;
            8w0 &&& 8w0x80: parse_int_word;       /* 1..127 words */
            default:        int_stack_unparsed;   /* also a shim length below 3 */
        }
    }

    state parse_int_word {
        packet.extract(hdr.int_stack.next);
        meta.int_words_left = meta.int_words_left - 1;
        transition select(meta.int_words_left) {
            8w0:     parse_udp_payload;
            default: parse_int_word;
        }
    }

    state int_stack_unparsed {
        meta.int_unparsed = 1;
        transition accept;
    }

    state parse_udp_payload {
        transition select(hdr.udp.dst_port) {
            ROCEV2_UDP_PORT: parse_bth;
            default:         accept;
        }
    }

    state parse_bth {
        packet.extract(hdr.bth);
        transition accept;
    }
}

control MyVerifyChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply {
        verify_checksum(hdr.ipv4.isValid() && hdr.ipv4.ihl == 4w5,
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.dscp, hdr.ipv4.ecn,
              hdr.ipv4.total_len, hdr.ipv4.identification, hdr.ipv4.flags,
              hdr.ipv4.frag_offset, hdr.ipv4.ttl, hdr.ipv4.protocol,
              hdr.ipv4.src_addr, hdr.ipv4.dst_addr },
            hdr.ipv4.hdr_checksum, HashAlgorithm.csum16);
    }
}

#endif
