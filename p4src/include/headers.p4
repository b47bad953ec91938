/* cellfabric fabric.p4 -- header and metadata types.
 * Every header is a whole number of bytes (BMv2 requires it). */
#ifndef _FABRIC_HEADERS_P4_
#define _FABRIC_HEADERS_P4_

#include "defines.p4"

/* Controller headers: the P4Runtime server adds/strips these on the CPU port. */
@controller_header("packet_in")
header packet_in_t {
    bit<9> ingress_port;
    bit<7> _pad;
}

@controller_header("packet_out")
header packet_out_t {
    bit<9> egress_port;
    bit<7> _pad;
}

header ethernet_t {
    mac_addr_t dst_addr;
    mac_addr_t src_addr;
    bit<16>    ether_type;
}

/* ARP for IPv4 over Ethernet (htype 1, ptype 0x0800, hlen 6, plen 4): 28 bytes. */
header arp_t {
    bit<16>     htype;
    bit<16>     ptype;
    bit<8>      hlen;
    bit<8>      plen;
    bit<16>     oper;
    mac_addr_t  sha;
    ipv4_addr_t spa;
    mac_addr_t  tha;
    ipv4_addr_t tpa;
}

header ipv4_t {
    bit<4>      version;
    bit<4>      ihl;
    bit<6>      dscp;
    bit<2>      ecn;
    bit<16>     total_len;
    bit<16>     identification;
    bit<3>      flags;
    bit<13>     frag_offset;
    bit<8>      ttl;
    bit<8>      protocol;
    bit<16>     hdr_checksum;
    ipv4_addr_t src_addr;
    ipv4_addr_t dst_addr;
}

header udp_t {
    bit<16> src_port;
    bit<16> dst_port;
    bit<16> length;
    bit<16> checksum;
}

/* TCP without options: options, if any, stay in the payload untouched. */
header tcp_t {
    bit<16> src_port;
    bit<16> dst_port;
    bit<32> seq_no;
    bit<32> ack_no;
    bit<4>  data_offset;
    bit<4>  res;
    bit<8>  flags;
    bit<16> window;
    bit<16> checksum;
    bit<16> urgent_ptr;
}

/* InfiniBand Base Transport Header, as carried by RoCEv2 (12 bytes). */
header bth_t {
    bit<8>  opcode;
    bit<1>  solicited;
    bit<1>  migreq;
    bit<2>  pad_count;
    bit<4>  tver;
    bit<16> pkey;
    bit<1>  fecn;
    bit<1>  becn;
    bit<6>  resv6;
    bit<24> dqpn;
    bit<1>  ackreq;
    bit<7>  resv7;
    bit<24> psn;
}

/* INT v2.1 shim for TCP/UDP with NPT = 0: the last byte keeps the original DSCP. */
header int_shim_t {
    bit<4> int_type;
    bit<2> npt;
    bit<2> rsvd1;
    bit<8> len;        /* INT-MD header + stack, in 4-byte words, shim excluded */
    bit<8> rsvd2;
    bit<6> orig_dscp;
    bit<2> rsvd3;
}

/* INT-MD metadata header (12 bytes). */
header int_md_t {
    bit<4>  ver;
    bit<1>  d;
    bit<1>  e;         /* max hop count exceeded */
    bit<1>  m;         /* MTU exceeded */
    bit<12> rsvd;
    bit<5>  hop_ml;
    bit<8>  remaining_hop_cnt;
    bit<16> instructions;
    bit<16> domain_id;
    bit<16> ds_instructions;
    bit<16> ds_flags;
}

/* This hop's metadata: one fixed header per instruction bit, emitted in bit order. */
header int_node_id_t      { bit<32> node_id; }                                  /* bit 0 */
header int_l1_ports_t     { bit<16> ingress_port; bit<16> egress_port; }        /* bit 1 */
header int_hop_latency_t  { bit<32> hop_latency; }                              /* bit 2 */
header int_queue_t        { bit<8> queue_id; bit<24> occupancy; }               /* bit 3 */
header int_ingress_ts_t   { bit<64> ingress_ts; }                               /* bit 4 */
header int_egress_ts_t    { bit<64> egress_ts; }                                /* bit 5 */
header int_l2_ports_t     { bit<32> ingress_port; bit<32> egress_port; }        /* bit 6 */
header int_tx_util_t      { bit<32> tx_util; }                                  /* bit 7 */
header int_buffer_t       { bit<8> buffer_id; bit<24> occupancy; }              /* bit 8 */

/* Upstream hops' metadata, kept as opaque 4-byte words. */
header int_word_t { bit<32> data; }

/* Telemetry Report v2.0 group header (8 bytes). */
header report_group_t {
    bit<4>  ver;
    bit<6>  hw_id;
    bit<22> seq_no;
    bit<32> node_id;
}

/* Individual report header + INT main contents (RepType 1), 12 bytes. */
header report_individual_t {
    bit<4>  rep_type;
    bit<4>  in_type;
    bit<8>  report_len;
    bit<8>  md_len;
    bit<1>  d;
    bit<1>  q;
    bit<1>  f;
    bit<1>  i;
    bit<4>  rsvd;
    bit<16> rep_md_bits;
    bit<16> domain_id;
    bit<16> ds_md_bits;
    bit<16> ds_md_status;
}

/* The sink's own metadata in the report, per REPORT_MD_BITS (bits 1 and 4). */
header report_md_t {
    bit<16> ingress_port;
    bit<16> egress_port;
    bit<64> ingress_ts;
}

struct headers_t {
    packet_in_t         packet_in;
    packet_out_t        packet_out;
    /* telemetry report encapsulation, valid only on report clones */
    ethernet_t          report_ethernet;
    ipv4_t              report_ipv4;
    udp_t               report_udp;
    report_group_t      report_group;
    report_individual_t report_individual;
    report_md_t         report_md;
    /* the packet */
    ethernet_t          ethernet;
    arp_t               arp;
    ipv4_t              ipv4;
    udp_t               udp;
    tcp_t               tcp;
    int_shim_t          int_shim;
    int_md_t            int_md;
    int_node_id_t       int_node_id;
    int_l1_ports_t      int_l1_ports;
    int_hop_latency_t   int_hop_latency;
    int_queue_t         int_queue;
    int_ingress_ts_t    int_ingress_ts;
    int_egress_ts_t     int_egress_ts;
    int_l2_ports_t      int_l2_ports;
    int_tx_util_t       int_tx_util;
    int_buffer_t        int_buffer;
    int_word_t[INT_MAX_STACK_WORDS] int_stack;
    bth_t               bth;
}

struct metadata_t {
    /* parser */
    bit<16> l4_src_port;
    bit<16> l4_dst_port;
    bit<8>  int_words_left;
    bit<1>  int_unparsed;      /* INT stack longer than the parser takes apart */
    /* classification */
    bit<1>  roce_data;         /* BTH with a SEND/WRITE opcode of RC, UC or UD */
    bit<1>  is_cell;           /* ... and the configured cell payload length */
    bit<16> cell_payload_len;  /* bytes after the BTH, before the ICRC, INT excluded */
    bit<8>  drop_reason;       /* DROP_*; non-zero drops the packet at the end of ingress */
    bit<8>  ip_proto;
    bit<1>  punted;            /* sent to the CPU port by the ACL or local_punt */
    ipv4_addr_t local_addr;    /* IPv4 destination, or an ARP's target: local_punt's key */
    /* routing */
    bit<1>  routed;
    bit<16> group_id;
    bit<2>  group_mode;
    bit<32> hash_salt;         /* per-switch multiplier that decorrelates tiers (group_mode) */
    bit<16> flow_hash;
    bit<16> select_key;
    bit<4>  adaptive_bucket;
    bit<1>  has_candidates;
    port_t  candidate_a;
    port_t  candidate_b;
    /* isolation */
    bit<16> src_tenant;
    bit<16> dst_tenant;
    bit<1>  src_tenant_known;
    bit<1>  dst_tenant_known;
    bit<1>  host_port;         /* arrived on a port with a host_port_binding entry */
    bit<16> port_tenant;       /* that port's host's tenant (0: none) */
    mac_addr_t  bound_mac;     /* that port's host NIC MAC */
    ipv4_addr_t bound_ip;      /* that port's host IPv4 address */
    /* INT */
    bit<1>  int_sink;          /* strip INT at egress */
    bit<8>  int_hop_words;
    bit<32> int_node_id;
    /* ECN profile of the egress port */
    bit<19> ecn_kmin;
    bit<19> ecn_kmax;
    bit<32> ecn_step;
    /* kept with the I2E report clone (clone_preserving_field_list index 1) */
    @field_list(1)
    bit<9>  report_ingress_port;
    @field_list(1)
    bit<9>  report_egress_port;
    @field_list(1)
    bit<48> report_ingress_ts;
}

#endif
