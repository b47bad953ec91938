/* Headers shared by the p4sim switch PTF programs (tests/ptf/test_switch_*.py).
 * Standard P4_16 for v1model: every program here also compiles with p4c-bm2-ss. */
#ifndef _SWITCH_HEADERS_P4_
#define _SWITCH_HEADERS_P4_

const bit<16> ETHERTYPE_IPV4  = 0x0800;
const bit<16> ETHERTYPE_PROBE = 0x88B5;  // IEEE local experimental ethertype 1
const bit<8>  IP_PROTO_UDP    = 17;

typedef bit<9>  port_t;
typedef bit<48> mac_t;
typedef bit<32> ip4_t;

header ethernet_t {
    mac_t   dst_addr;
    mac_t   src_addr;
    bit<16> ether_type;
}

header ipv4_t {
    bit<4>  version;
    bit<4>  ihl;
    bit<8>  diffserv;
    bit<16> total_len;
    bit<16> identification;
    bit<3>  flags;
    bit<13> frag_offset;
    bit<8>  ttl;
    bit<8>  protocol;
    bit<16> hdr_checksum;
    ip4_t   src_addr;
    ip4_t   dst_addr;
}

header udp_t {
    bit<16> src_port;
    bit<16> dst_port;
    bit<16> length;
    bit<16> checksum;
}

/* The probe: a 28-byte header right after Ethernet into which the data plane copies what a
 * test wants to observe (register values, egress_rid, queue depths and times). The tests'
 * Scapy layer `Probe` (tests/ptf/switch_lib.py) has the same layout. */
header probe_t {
    bit<32> seq;
    bit<16> rid;
    bit<16> egress_port;
    bit<32> enq_qdepth;
    bit<32> deq_qdepth;
    bit<32> stamp;
    bit<32> enq_timestamp;
    bit<32> deq_timedelta;
}

#endif
