/* cellfabric fabric.p4 -- INT-MD v2.1 over UDP (source, transit, sink) and
 * Telemetry Report v2.0 to the collector. Wire layout: hosts/wire.py, p4src/README.md. */
#ifndef _FABRIC_TELEMETRY_P4_
#define _FABRIC_TELEMETRY_P4_

#include "headers.p4"

/* INT events, by INT_* index (defines.p4); shared by ingress and egress. */
counter(INT_SLOTS, CounterType.packets) int_events;

/* Ingress: the INT source inserts shim + INT-MD header for watched UDP flows; the INT sink
 * decision is taken here, where the egress port is known and the packet as received can still
 * be cloned (I2E) for the telemetry report. */
control IntIngress(inout headers_t hdr,
                   inout metadata_t meta,
                   inout standard_metadata_t standard_metadata) {
    direct_counter(CounterType.packets_and_bytes) int_watchlist_counter;
    direct_counter(CounterType.packets_and_bytes) int_sink_counter;

    /* Only instruction bits 0-8 are supported; others are cleared so that Hop ML matches. */
    action int_source(bit<16> instructions, bit<8> max_hops) {
        hdr.int_shim.setValid();
        hdr.int_shim.int_type = INT_TYPE_MD;
        hdr.int_shim.npt = 0;
        hdr.int_shim.rsvd1 = 0;
        hdr.int_shim.len = INT_MD_WORDS;
        hdr.int_shim.rsvd2 = 0;
        hdr.int_shim.orig_dscp = hdr.ipv4.dscp;
        hdr.int_shim.rsvd3 = 0;
        hdr.int_md.setValid();
        hdr.int_md.ver = INT_VERSION;
        hdr.int_md.d = 0;
        hdr.int_md.e = 0;
        hdr.int_md.m = 0;
        hdr.int_md.rsvd = 0;
        hdr.int_md.hop_ml = 0;   /* set from the bitmap below */
        hdr.int_md.remaining_hop_cnt = max_hops;
        hdr.int_md.instructions = instructions & 16w0xFF80;
        hdr.int_md.domain_id = 0;
        hdr.int_md.ds_instructions = 0;
        hdr.int_md.ds_flags = 0;
        hdr.ipv4.dscp = INT_DSCP;
        hdr.ipv4.total_len = hdr.ipv4.total_len + INT_HEADERS_BYTES;
        hdr.udp.length = hdr.udp.length + INT_HEADERS_BYTES;
    }

    table int_watchlist {
        key = {
            hdr.ipv4.src_addr : ternary;
            hdr.ipv4.dst_addr : ternary;
            meta.l4_src_port  : ternary;
            meta.l4_dst_port  : ternary;
        }
        actions = { int_source; NoAction; }
        default_action = NoAction();
        counters = int_watchlist_counter;
        size = 1024;
    }

    /* (a) strip INT at egress and send a report through clone session `session`. */
    action int_sink_report(bit<32> session) {
        meta.int_sink = 1;
        meta.report_ingress_port = standard_metadata.ingress_port;
        meta.report_egress_port = standard_metadata.egress_spec;
        meta.report_ingress_ts = standard_metadata.ingress_global_timestamp;
        clone_preserving_field_list(CloneType.I2E, session, 8w1);
    }

    /* strip INT at egress without a report. */
    action int_sink_strip() {
        meta.int_sink = 1;
    }

    /* Egress ports towards hosts that are not INT-aware. Ports without an entry keep INT
     * (b: an INT-aware host is the sink, HPCC reads the stack). */
    table int_sink {
        key = { standard_metadata.egress_spec : exact; }
        actions = { int_sink_report; int_sink_strip; NoAction; }
        default_action = NoAction();
        counters = int_sink_counter;
        size = PORT_SLOTS;
    }

    apply {
        bit<1> arrived_with_int = 0;
        if (hdr.int_md.isValid()) {
            arrived_with_int = 1;
        }
        /* Only UDP without a checksum (RoCEv2 sends 0): INT v2.1 says a zero L4 checksum stays
         * zero, and this program does not update non-zero ones. */
        if (hdr.udp.isValid() && hdr.udp.checksum == 0 && !hdr.int_shim.isValid()
                && hdr.ipv4.dscp != INT_DSCP) {
            if (int_watchlist.apply().hit) {
                bit<16> ins = hdr.int_md.instructions;
                hdr.int_md.hop_ml = (bit<5>)ins[15:15] + (bit<5>)ins[14:14]
                    + (bit<5>)ins[13:13] + (bit<5>)ins[12:12]
                    + ((bit<5>)ins[11:11] << 1) + ((bit<5>)ins[10:10] << 1)
                    + ((bit<5>)ins[9:9] << 1) + (bit<5>)ins[8:8] + (bit<5>)ins[7:7];
                int_events.count(INT_SOURCE_INSERT);
            }
        }
        if (arrived_with_int == 1) {
            if (meta.int_unparsed == 1) {
                int_events.count(INT_UNPARSED);
            } else {
                int_sink.apply();
            }
        }
    }
}

/* Egress, normal packets: INT transit (push this hop's metadata) or sink (strip). */
control IntEgress(inout headers_t hdr,
                  inout metadata_t meta,
                  inout standard_metadata_t standard_metadata) {
    action int_transit(bit<32> node_id) {
        meta.int_node_id = node_id;
    }

    /* One entry (int_type = 1, INT-MD) makes this switch an INT transit hop with a node id. */
    table int_transit_config {
        key = { hdr.int_shim.int_type : exact; }
        actions = { int_transit; NoAction; }
        default_action = NoAction();
        size = 4;
    }

    apply {
        bit<32> tx_bytes;
        port_tx_bytes.read(tx_bytes, (bit<32>)standard_metadata.egress_port);

        if (meta.int_sink == 1) {
            bit<16> int_bytes = ((bit<16>)hdr.int_shim.len + 1) << 2;
            hdr.ipv4.dscp = hdr.int_shim.orig_dscp;
            hdr.ipv4.total_len = hdr.ipv4.total_len - int_bytes;
            hdr.udp.length = hdr.udp.length - int_bytes;
            /* a non-zero checksum can only come from a foreign INT source; it cannot be
             * updated here, so it is cleared (IPv4: zero = no checksum) */
            hdr.udp.checksum = 0;
            hdr.int_shim.setInvalid();
            hdr.int_md.setInvalid();
            hdr.int_stack.pop_front(INT_MAX_STACK_WORDS);
            int_events.count(INT_SINK_STRIP);
        } else if (hdr.int_md.isValid()) {
            if (int_transit_config.apply().hit) {
                bit<16> ins = hdr.int_md.instructions;
                meta.int_hop_words = (bit<8>)ins[15:15] + (bit<8>)ins[14:14]
                    + (bit<8>)ins[13:13] + (bit<8>)ins[12:12]
                    + ((bit<8>)ins[11:11] << 1) + ((bit<8>)ins[10:10] << 1)
                    + ((bit<8>)ins[9:9] << 1) + (bit<8>)ins[8:8] + (bit<8>)ins[7:7];
                if (hdr.int_md.remaining_hop_cnt == 0) {
                    hdr.int_md.e = 1;
                    int_events.count(INT_HOP_EXCEEDED);
                } else if ((ins & 16w0x007F) != 0
                        || (bit<8>)hdr.int_md.hop_ml != meta.int_hop_words
                        || meta.int_hop_words == 0
                        || hdr.udp.checksum != 0) {
                    /* reserved/unsupported instructions, a Hop ML that disagrees, or a UDP
                     * checksum this program would have to update: add nothing and leave
                     * RemainingHopCnt alone (INT v2.1 allows a hop to skip INT) */
                    int_events.count(INT_SKIPPED);
                } else {
                    if (ins[15:15] == 1) {
                        hdr.int_node_id.setValid();
                        hdr.int_node_id.node_id = meta.int_node_id;
                    }
                    if (ins[14:14] == 1) {
                        hdr.int_l1_ports.setValid();
                        hdr.int_l1_ports.ingress_port = (bit<16>)standard_metadata.ingress_port;
                        hdr.int_l1_ports.egress_port = (bit<16>)standard_metadata.egress_port;
                    }
                    if (ins[13:13] == 1) {
                        hdr.int_hop_latency.setValid();
                        hdr.int_hop_latency.hop_latency =
                            (bit<32>)(standard_metadata.egress_global_timestamp
                                      - standard_metadata.ingress_global_timestamp);
                    }
                    if (ins[12:12] == 1) {
                        hdr.int_queue.setValid();
                        hdr.int_queue.queue_id = (bit<8>)standard_metadata.priority;
                        hdr.int_queue.occupancy = (bit<24>)standard_metadata.enq_qdepth;
                    }
                    if (ins[11:11] == 1) {
                        hdr.int_ingress_ts.setValid();
                        hdr.int_ingress_ts.ingress_ts =
                            (bit<64>)standard_metadata.ingress_global_timestamp;
                    }
                    if (ins[10:10] == 1) {
                        hdr.int_egress_ts.setValid();
                        hdr.int_egress_ts.egress_ts =
                            (bit<64>)standard_metadata.egress_global_timestamp;
                    }
                    if (ins[9:9] == 1) {
                        hdr.int_l2_ports.setValid();
                        hdr.int_l2_ports.ingress_port = (bit<32>)standard_metadata.ingress_port;
                        hdr.int_l2_ports.egress_port = (bit<32>)standard_metadata.egress_port;
                    }
                    if (ins[8:8] == 1) {
                        hdr.int_tx_util.setValid();
                        hdr.int_tx_util.tx_util = tx_bytes;
                    }
                    if (ins[7:7] == 1) {
                        hdr.int_buffer.setValid();
                        hdr.int_buffer.buffer_id = 0;
                        hdr.int_buffer.occupancy = (bit<24>)standard_metadata.enq_qdepth;
                    }
                    bit<16> pushed = (bit<16>)meta.int_hop_words << 2;
                    hdr.int_md.remaining_hop_cnt = hdr.int_md.remaining_hop_cnt - 1;
                    hdr.int_shim.len = hdr.int_shim.len + meta.int_hop_words;
                    hdr.ipv4.total_len = hdr.ipv4.total_len + pushed;
                    hdr.udp.length = hdr.udp.length + pushed;
                    int_events.count(INT_TRANSIT_PUSH);
                }
            }
        }

        /* Bytes that leave this port, counted after this hop's changes. */
        bit<32> frame_len = standard_metadata.packet_length;
        if (hdr.ipv4.isValid()) {
            frame_len = (bit<32>)hdr.ipv4.total_len + 14;
        }
        port_tx_bytes.write((bit<32>)standard_metadata.egress_port, tx_bytes + frame_len);
    }
}

/* Egress, I2E clone of a packet at an INT sink: wrap the packet as received (INT stack
 * included) in a Telemetry Report v2.0 for the collector behind this egress port. */
control TelemetryReport(inout headers_t hdr,
                        inout metadata_t meta,
                        inout standard_metadata_t standard_metadata) {
    register<bit<32>>(1) report_seq;

    action encap_report(mac_addr_t src_mac, mac_addr_t dst_mac,
                        ipv4_addr_t src_ip, ipv4_addr_t dst_ip,
                        bit<16> udp_src_port, bit<16> udp_dst_port, bit<32> node_id) {
        hdr.report_ethernet.setValid();
        hdr.report_ethernet.dst_addr = dst_mac;
        hdr.report_ethernet.src_addr = src_mac;
        hdr.report_ethernet.ether_type = ETHERTYPE_IPV4;
        hdr.report_ipv4.setValid();
        hdr.report_ipv4.version = 4;
        hdr.report_ipv4.ihl = 5;
        hdr.report_ipv4.dscp = 0;
        hdr.report_ipv4.ecn = 0;
        hdr.report_ipv4.identification = 0;
        hdr.report_ipv4.flags = 3w2;   /* don't fragment */
        hdr.report_ipv4.frag_offset = 0;
        hdr.report_ipv4.ttl = 64;
        hdr.report_ipv4.protocol = IP_PROTO_UDP;
        hdr.report_ipv4.src_addr = src_ip;
        hdr.report_ipv4.dst_addr = dst_ip;
        hdr.report_udp.setValid();
        hdr.report_udp.src_port = udp_src_port;
        hdr.report_udp.dst_port = udp_dst_port;
        hdr.report_udp.checksum = 0;
        hdr.report_group.setValid();
        hdr.report_group.ver = REPORT_VERSION;
        hdr.report_group.hw_id = 0;
        hdr.report_group.node_id = node_id;
        hdr.report_individual.setValid();
        hdr.report_individual.rep_type = REPORT_TYPE_INT;
        hdr.report_individual.in_type = REPORT_IN_TYPE_ETHERNET;
        hdr.report_individual.md_len = REPORT_MD_WORDS;
        hdr.report_individual.d = 0;
        hdr.report_individual.q = 0;
        hdr.report_individual.f = 1;
        hdr.report_individual.i = 0;
        hdr.report_individual.rsvd = 0;
        hdr.report_individual.rep_md_bits = REPORT_MD_BITS;
        hdr.report_individual.domain_id = 0;
        hdr.report_individual.ds_md_bits = 0;
        hdr.report_individual.ds_md_status = 0;
        hdr.report_md.setValid();
        hdr.report_md.ingress_port = (bit<16>)meta.report_ingress_port;
        hdr.report_md.egress_port = (bit<16>)meta.report_egress_port;
        hdr.report_md.ingress_ts = (bit<64>)meta.report_ingress_ts;
    }

    action no_collector() {
        meta.drop_reason = DROP_NO_COLLECTOR;
    }

    /* Keyed on the clone session's port: where the collector is reached. */
    table report_encap {
        key = { standard_metadata.egress_port : exact; }
        actions = { encap_report; @defaultonly no_collector; }
        default_action = no_collector();
        size = 16;
    }

    apply {
        if (!hdr.ipv4.isValid()) {
            meta.drop_reason = DROP_NO_COLLECTOR;
        } else if (report_encap.apply().hit) {
            /* the inner contents: the whole Ethernet frame as received */
            bit<16> inner_len = hdr.ipv4.total_len + 14;
            /* group (8) + individual header and main contents (12) + sink metadata (12) */
            hdr.report_udp.length = inner_len + 40;
            hdr.report_ipv4.total_len = inner_len + 60;
            /* words after the first word of the individual header, rounded up */
            bit<16> words = 16w5 + ((inner_len + 3) >> 2);
            if (words > 255) {
                hdr.report_individual.report_len = 8w255;
            } else {
                hdr.report_individual.report_len = (bit<8>)words;
            }
            bit<32> seq;
            report_seq.read(seq, 32w0);
            hdr.report_group.seq_no = (bit<22>)seq;
            report_seq.write(32w0, seq + 1);
            int_events.count(INT_REPORT);
        }
    }
}

#endif
