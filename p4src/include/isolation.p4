/* cellfabric fabric.p4 -- tenant isolation at the ingress leaf.
 * host_tenant_src / host_tenant_dst hold the same host -> tenant map (a table can be applied
 * only once per packet, and both ends of the packet need a lookup). Traffic between two hosts
 * that both have a tenant, and whose tenants differ, is dropped (DROP_ISOLATION). Traffic where
 * either end has no tenant (e.g. a spine, or a gateway address) is not affected: the control
 * plane installs the map on leaves only. */
#ifndef _FABRIC_ISOLATION_P4_
#define _FABRIC_ISOLATION_P4_

#include "headers.p4"

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
            host_tenant_src.apply();
            host_tenant_dst.apply();
            if (meta.src_tenant_known == 1 && meta.dst_tenant_known == 1
                    && meta.src_tenant != meta.dst_tenant) {
                meta.drop_reason = DROP_ISOLATION;
            }
        }
    }
}

#endif
