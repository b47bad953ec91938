/* cellfabric fabric.p4 -- tenant isolation at the ingress leaf.
 *
 * HostPortGuard: every host-facing port of a leaf is bound (host_port_binding) to the one host
 * NIC behind it: its MAC, its IPv4 address and its tenant. A frame from a bound port must carry
 * that NIC's source MAC (else DROP_SPOOF_MAC) and, if IPv4, that host's source address (else
 * DROP_SPOOF_IP). The tenant is the port's, never the frame's: a host port is untagged, so a
 * frame that brings its own tenant tag (802.1Q/802.1ad VLAN tag, a VXLAN header, a BTH P_Key
 * other than the default partition) is refused (DROP_TENANT_TAG). Hosts may be INT sources
 * (shim + INT-MD header, empty stack), but metadata is only ever pushed by switches: a host
 * frame whose INT stack is not empty, or whose shim is not INT-MD, is refused (DROP_FORGED_INT).
 * Ports without a binding (uplinks, and every port of a switch the control plane did not bind)
 * are not checked.
 *
 * TenantIsolation: host_tenant_src / host_tenant_dst hold the same host -> tenant map (a table
 * can be applied only once per packet, and both ends of the packet need a lookup); on a bound
 * host port the source tenant is the port's. Traffic between two hosts that both have a
 * tenant, and whose tenants differ, is dropped: RoCEv2 data (a cell into another tenant's queue
 * pair) as DROP_FOREIGN_QP, RoCEv2 feedback (ACK, NAK, credit grant, CNP) as
 * DROP_FOREIGN_FEEDBACK, anything else as DROP_ISOLATION. Traffic where either end has no
 * tenant (e.g. a spine, or a gateway address) is not affected: the control plane installs the
 * map on leaves only. */
#ifndef _FABRIC_ISOLATION_P4_
#define _FABRIC_ISOLATION_P4_

#include "headers.p4"

control HostPortGuard(inout headers_t hdr,
                      inout metadata_t meta,
                      inout standard_metadata_t standard_metadata) {
    direct_counter(CounterType.packets_and_bytes) host_port_binding_counter;

    action bind_host_port(bit<16> tenant, mac_addr_t mac, ipv4_addr_t ip) {
        meta.host_port = 1;
        meta.port_tenant = tenant;
        meta.bound_mac = mac;
        meta.bound_ip = ip;
    }

    table host_port_binding {
        key = { standard_metadata.ingress_port : exact; }
        actions = { bind_host_port; NoAction; }
        default_action = NoAction();
        counters = host_port_binding_counter;
        size = PORT_SLOTS;
    }

    apply {
        if (host_port_binding.apply().hit) {
            if (hdr.ethernet.src_addr != meta.bound_mac) {
                meta.drop_reason = DROP_SPOOF_MAC;
            } else if (hdr.ethernet.ether_type == ETHERTYPE_VLAN
                       || hdr.ethernet.ether_type == ETHERTYPE_QINQ) {
                meta.drop_reason = DROP_TENANT_TAG;
            } else if (hdr.ipv4.isValid()) {
                if (hdr.ipv4.src_addr != meta.bound_ip) {
                    meta.drop_reason = DROP_SPOOF_IP;
                } else if (hdr.udp.isValid() && hdr.udp.dst_port == VXLAN_UDP_PORT) {
                    meta.drop_reason = DROP_TENANT_TAG;
                } else if (hdr.int_shim.isValid()
                           && (hdr.int_shim.int_type != INT_TYPE_MD
                               || hdr.int_shim.len != INT_MD_WORDS)) {
                    meta.drop_reason = DROP_FORGED_INT;
                } else if (hdr.bth.isValid()) {
                    if (hdr.bth.pkey != BTH_PKEY_DEFAULT) {
                        meta.drop_reason = DROP_TENANT_TAG;
                    }
                }
            }
        }
    }
}

control TenantIsolation(inout headers_t hdr,
                        inout metadata_t meta,
                        inout standard_metadata_t standard_metadata) {
    direct_counter(CounterType.packets_and_bytes) host_tenant_src_counter;
    direct_counter(CounterType.packets_and_bytes) host_tenant_dst_counter;

    action set_src_tenant(bit<16> tenant) {
        meta.src_tenant = tenant;
        meta.src_tenant_known = 1;
    }

    action set_dst_tenant(bit<16> tenant) {
        meta.dst_tenant = tenant;
        meta.dst_tenant_known = 1;
    }

    table host_tenant_src {
        key = { hdr.ipv4.src_addr : exact; }
        actions = { set_src_tenant; NoAction; }
        default_action = NoAction();
        counters = host_tenant_src_counter;
        size = HOST_TABLE_SIZE;
    }

    table host_tenant_dst {
        key = { hdr.ipv4.dst_addr : exact; }
        actions = { set_dst_tenant; NoAction; }
        default_action = NoAction();
        counters = host_tenant_dst_counter;
        size = HOST_TABLE_SIZE;
    }

    apply {
        if (hdr.ipv4.isValid()) {
            if (meta.host_port == 1) {
                /* the port's tenant: the source address was checked against the port */
                if (meta.port_tenant != 0) {
                    meta.src_tenant = meta.port_tenant;
                    meta.src_tenant_known = 1;
                }
            } else {
                host_tenant_src.apply();
            }
            host_tenant_dst.apply();
            if (meta.src_tenant_known == 1 && meta.dst_tenant_known == 1
                    && meta.src_tenant != meta.dst_tenant) {
                if (meta.roce_data == 1) {
                    meta.drop_reason = DROP_FOREIGN_QP;
                } else if (hdr.bth.isValid()) {
                    meta.drop_reason = DROP_FOREIGN_FEEDBACK;
                } else {
                    meta.drop_reason = DROP_ISOLATION;
                }
            }
        }
    }
}

#endif
