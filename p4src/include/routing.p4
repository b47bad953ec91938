/* cellfabric fabric.p4 -- L2/ARP, IPv4 routing, next-hop groups with cell spraying,
 * and the per-hop MAC rewrite. */
#ifndef _FABRIC_ROUTING_P4_
#define _FABRIC_ROUTING_P4_

#include "headers.p4"

/* Ingress: ACL, ARP responder, L2 bridging, IPv4 LPM to a next-hop group, TTL. */
control Forwarding(inout headers_t hdr,
                   inout metadata_t meta,
                   inout standard_metadata_t standard_metadata) {
    direct_counter(CounterType.packets_and_bytes) acl_counter;
    direct_counter(CounterType.packets_and_bytes) arp_responder_counter;
    direct_counter(CounterType.packets_and_bytes) l2_forward_counter;
    direct_counter(CounterType.packets_and_bytes) ipv4_lpm_counter;

    /* ---- ACL: control traffic to the CPU, administrative drops ---- */
    action punt_to_cpu() {
        standard_metadata.egress_spec = CPU_PORT;
        meta.punted = 1;
    }

    action acl_drop() {
        meta.drop_reason = DROP_ACL;
    }

    table acl {
        key = {
            standard_metadata.ingress_port : ternary;
            hdr.ethernet.dst_addr          : ternary;
            hdr.ethernet.ether_type        : ternary;
            meta.ip_proto                  : ternary;
            meta.l4_dst_port               : ternary;
        }
        actions = { punt_to_cpu; acl_drop; NoAction; }
        default_action = NoAction();
        counters = acl_counter;
        size = 256;
    }

    /* ---- the switch's own addresses: with a network OS on the switch (--routing bgp), the
     * control plane lists its link addresses here, and every IPv4 packet and ARP addressed to
     * one of them (BGP, BFD, ICMP, ARP) goes to the CPU port for it. Empty under central
     * routing, which it therefore leaves unchanged. ---- */
    table local_punt {
        key = { meta.local_addr : exact; }
        actions = { punt_to_cpu; NoAction; }
        default_action = NoAction();
        size = 256;
    }

    /* ---- ARP: answer requests for a gateway address, bridge everything else ---- */
    action arp_reply(mac_addr_t gateway_mac) {
        ipv4_addr_t asked = hdr.arp.tpa;
        hdr.ethernet.dst_addr = hdr.ethernet.src_addr;
        hdr.ethernet.src_addr = gateway_mac;
        hdr.arp.oper = ARP_OPER_REPLY;
        hdr.arp.tha = hdr.arp.sha;
        hdr.arp.tpa = hdr.arp.spa;
        hdr.arp.sha = gateway_mac;
        hdr.arp.spa = asked;
        standard_metadata.egress_spec = standard_metadata.ingress_port;
    }

    table arp_responder {
        key = { hdr.arp.tpa : exact; }
        actions = { arp_reply; NoAction; }
        default_action = NoAction();
        counters = arp_responder_counter;
        size = HOST_TABLE_SIZE;  /* proxy ARP: an entry per host of the fabric */
    }

    /* ---- the router's own MAC addresses: frames to them are routed ---- */
    table my_station {
        key = { hdr.ethernet.dst_addr : exact; }
        actions = { NoAction; }
        default_action = NoAction();
        size = 64;
    }

    /* ---- L2: attached hosts' MACs, broadcast to a multicast group ---- */
    action l2_output(port_t port) {
        standard_metadata.egress_spec = port;
    }

    action l2_flood(bit<16> mcast_grp) {
        standard_metadata.mcast_grp = mcast_grp;
    }

    action l2_miss() {
        meta.drop_reason = DROP_L2_MISS;
    }

    table l2_forward {
        key = { hdr.ethernet.dst_addr : exact; }
        actions = { l2_output; l2_flood; l2_miss; }
        default_action = l2_miss();
        counters = l2_forward_counter;
        size = HOST_TABLE_SIZE;
    }

    /* ---- L3 ---- */
    action set_next_group(bit<16> group_id) {
        meta.group_id = group_id;
        meta.routed = 1;
    }

    action route_to_cpu() {
        standard_metadata.egress_spec = CPU_PORT;
        meta.punted = 1;
    }

    action no_route() {
        meta.drop_reason = DROP_NO_ROUTE;
    }

    table ipv4_lpm {
        key = { hdr.ipv4.dst_addr : lpm; }
        actions = { set_next_group; route_to_cpu; no_route; }
        default_action = no_route();
        counters = ipv4_lpm_counter;
        size = LPM_SIZE;
    }

    apply {
        bit<1> bridge = 0;
        acl.apply();
        if (meta.punted == 0 && meta.drop_reason == DROP_NONE
                && (hdr.arp.isValid() || hdr.ipv4.isValid())) {
            if (hdr.arp.isValid()) {
                meta.local_addr = hdr.arp.tpa;
            } else {
                meta.local_addr = hdr.ipv4.dst_addr;
            }
            local_punt.apply();
        }
        if (meta.punted == 0 && meta.drop_reason == DROP_NONE) {
            if (hdr.arp.isValid()) {
                bridge = 1;
                if (hdr.arp.oper == ARP_OPER_REQUEST && hdr.arp.htype == ARP_HTYPE_ETHERNET
                        && hdr.arp.ptype == ETHERTYPE_IPV4) {
                    if (arp_responder.apply().hit) {
                        bridge = 0;
                    }
                }
            } else if (hdr.ipv4.isValid()) {
                bridge = 1;
                if (my_station.apply().hit) {
                    bridge = 0;
                    if (hdr.ipv4.ihl != 4w5) {
                        meta.drop_reason = DROP_BAD_PACKET;
                    } else {
                        ipv4_lpm.apply();
                        if (meta.routed == 1) {
                            if (hdr.ipv4.ttl <= 1) {
                                meta.routed = 0;
                                meta.drop_reason = DROP_TTL;
                            } else {
                                hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
                            }
                        }
                    }
                }
            } else {
                bridge = 1;
            }
            if (bridge == 1) {
                l2_forward.apply();
            }
        }
    }
}

/* Ingress: choose the egress port among a next-hop group's members.
 * Every group is a P4Runtime action-selector group (members: set_egress_port(port), with
 * watch_port so a down port leaves the group at once). The selector hashes one 16-bit key with
 * the identity algorithm, i.e. the member is select_key mod (live members), and the key is
 * chosen per packet by the group's mode:
 *   ecmp         salted crc32 of the 5-tuple (every packet)
 *   spray        salted crc32 of the 5-tuple and the BTH PSN (cells of the configured length)
 *   round-robin  a per-group register counter, +1 per cell (cells of the configured length)
 *   adaptive     cells: the less occupied (port_qdepth) of two candidate ports that
 *                adaptive_candidates gives for (group, 4-bit bucket of the salted spray key),
 *                the first candidate on a tie; without candidates, as spray.
 * RoCEv2 feedback (a BTH with no data opcode: ACK, NAK, CNP) uses the spray key in every mode
 * but ecmp. Other traffic, and data of another length, always uses the 5-tuple key.
 * Salting: h = low 16 bits of the crc32, key = bits 31..16 of (h * salt) mod 2^32, with the
 * salt from the group's group_mode entry (the control plane gives every switch its own odd
 * salt >= 2^16). Putting a salt into the CRC's input would not do: a CRC is affine over GF(2),
 * so bit 0 of crc(salt, x) is bit 0 of crc(0, x) flipped or not, and two tiers choosing among
 * two members would still make the same (or the opposite) choice for every packet. The
 * multiplication's carries make each switch's key a different function of h. */
control SprayGroups(inout headers_t hdr,
                    inout metadata_t meta,
                    inout standard_metadata_t standard_metadata) {
    counter(CELL_SLOTS, CounterType.packets) cell_counter;
    register<bit<16>>(GROUP_SLOTS) rr_counter;
    direct_counter(CounterType.packets_and_bytes) group_select_counter;
    action_selector(HashAlgorithm.identity, 32w4096, 32w16) group_selector;

    action set_group_mode(bit<2> mode, bit<32> salt) {
        meta.group_mode = mode;
        meta.hash_salt = salt;
    }

    table group_mode {
        key = { meta.group_id : exact; }
        actions = { set_group_mode; }
        default_action = set_group_mode(MODE_ECMP, HASH_SALT_IDENTITY);
        size = GROUP_SLOTS;
    }

    action cell_length_ok() {
        meta.is_cell = 1;
    }

    /* One entry per configured cell payload length (hosts/wire.py CELL_PAYLOAD_DEFAULT). */
    table cell_length {
        key = { meta.cell_payload_len : exact; }
        actions = { cell_length_ok; NoAction; }
        default_action = NoAction();
        size = 16;
    }

    action set_candidates(port_t port_a, port_t port_b) {
        meta.candidate_a = port_a;
        meta.candidate_b = port_b;
        meta.has_candidates = 1;
    }

    table adaptive_candidates {
        key = {
            meta.group_id        : exact;
            meta.adaptive_bucket : exact;
        }
        actions = { set_candidates; NoAction; }
        default_action = NoAction();
        size = SELECTOR_SIZE;
    }

    action set_egress_port(port_t port) {
        standard_metadata.egress_spec = port;
    }

    table group_select {
        key = {
            meta.group_id   : exact;
            meta.select_key : selector;
        }
        /* p4c-bm2-ss warns that BMv2 cannot hold a default action for a table with an action
         * profile and leaves it out of the JSON (it does the same for the NoAction it adds
         * when none is written). Harmless here: a miss runs no action on either target and
         * is caught by .hit in apply, so no behaviour depends on the default action. */
        actions = { set_egress_port; @defaultonly NoAction; }
        const default_action = NoAction();
        implementation = group_selector;
        counters = group_select_counter;
        size = GROUP_SLOTS;
    }

    apply {
        group_mode.apply();
        hash(meta.flow_hash, HashAlgorithm.crc32, 16w0,
             { hdr.ipv4.src_addr, hdr.ipv4.dst_addr, hdr.ipv4.protocol,
               meta.l4_src_port, meta.l4_dst_port },
             32w65536);
        meta.select_key = (bit<16>)((((bit<32>)meta.flow_hash) * meta.hash_salt) >> 16);

        if (meta.roce_data == 1) {
            cell_length.apply();
            if (meta.is_cell == 1) {
                cell_counter.count(CELL_SPRAYED);
            } else {
                cell_counter.count(CELL_BAD_LENGTH);
            }
        }

        /* RoCEv2 feedback (ACK, NAK, CNP: a BTH that is not data) of a sprayed flow is sprayed
         * by its PSN too: flow-hashed, the ACKs of several flows can meet on one link, and on a
         * link whose rate counts packets two flows' ACKs take the share their sprayed cells
         * were counted on (a fat-tree core link then overflows). */
        bool feedback = hdr.bth.isValid() && meta.roce_data == 0;
        if ((meta.is_cell == 1 || feedback) && meta.group_mode != MODE_ECMP) {
            if (meta.group_mode == MODE_ROUND_ROBIN && meta.is_cell == 1) {
                bit<16> turn;
                rr_counter.read(turn, (bit<32>)meta.group_id);
                meta.select_key = turn;
                rr_counter.write((bit<32>)meta.group_id, turn + 1);
            } else {
                bit<16> cell_hash;
                hash(cell_hash, HashAlgorithm.crc32, 16w0,
                     { hdr.ipv4.src_addr, hdr.ipv4.dst_addr, hdr.ipv4.protocol,
                       meta.l4_src_port, meta.l4_dst_port, hdr.bth.psn },
                     32w65536);
                meta.select_key = (bit<16>)((((bit<32>)cell_hash) * meta.hash_salt) >> 16);
                if (meta.group_mode == MODE_ADAPTIVE && meta.is_cell == 1) {
                    meta.adaptive_bucket = meta.select_key[3:0];
                    adaptive_candidates.apply();
                }
            }
        }

        if (meta.has_candidates == 1) {
            bit<32> depth_a;
            bit<32> depth_b;
            port_qdepth.read(depth_a, (bit<32>)meta.candidate_a);
            port_qdepth.read(depth_b, (bit<32>)meta.candidate_b);
            if (depth_b < depth_a) {
                standard_metadata.egress_spec = meta.candidate_b;
            } else {
                standard_metadata.egress_spec = meta.candidate_a;
            }
        } else {
            if (!group_select.apply().hit) {
                meta.drop_reason = DROP_NO_ROUTE;   /* group id without a selector entry */
            }
        }
    }
}

/* Egress: per-hop MAC rewrite of routed packets (source = this port's MAC, destination = the
 * neighbour on that port: fabric links and host links are point to point). */
control EgressRewrite(inout headers_t hdr,
                      inout metadata_t meta,
                      inout standard_metadata_t standard_metadata) {
    action set_port_macs(mac_addr_t src_mac, mac_addr_t dst_mac) {
        hdr.ethernet.src_addr = src_mac;
        hdr.ethernet.dst_addr = dst_mac;
    }

    table egress_rewrite {
        key = { standard_metadata.egress_port : exact; }
        actions = { set_port_macs; NoAction; }
        default_action = NoAction();
        size = PORT_SLOTS;
    }

    apply {
        if (meta.routed == 1) {
            egress_rewrite.apply();
        }
    }
}

#endif
