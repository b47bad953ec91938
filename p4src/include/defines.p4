/* cellfabric fabric.p4 -- wire constants and sizes.
 * Every constant here is part of the contract with hosts/wire.py and controlplane/;
 * p4src/README.md lists them. */
#ifndef _FABRIC_DEFINES_P4_
#define _FABRIC_DEFINES_P4_

/* The CPU port BMv2/p4sim use for P4Runtime packet-in/out (--cpu-port). */
#ifndef CPU_PORT
#define CPU_PORT 510
#endif

/* Table and register sizes. Ports are 9 bits wide, so per-port arrays have 512 slots. */
#define PORT_SLOTS 512
#define GROUP_SLOTS 1024
#define LPM_SIZE 4096
#define HOST_TABLE_SIZE 4096
#define SELECTOR_SIZE 4096

/* Largest INT metadata stack the parser will take apart, in 4-byte words: 8 hops of all nine
 * supported instructions need 96 words; the stack parser accepts 1..127 words (mask 0x80). */
#define INT_MAX_STACK_WORDS 127

typedef bit<48> mac_addr_t;
typedef bit<32> ipv4_addr_t;
typedef bit<9>  port_t;

const bit<16> ETHERTYPE_IPV4 = 0x0800;
const bit<16> ETHERTYPE_ARP  = 0x0806;
const bit<8>  IP_PROTO_TCP   = 6;
const bit<8>  IP_PROTO_UDP   = 17;
const bit<16> ROCEV2_UDP_PORT = 4791;

const bit<16> ARP_HTYPE_ETHERNET = 1;
const bit<16> ARP_OPER_REQUEST   = 1;
const bit<16> ARP_OPER_REPLY     = 2;

/* RoCEv2 BTH opcodes that matter to the fabric. */
const bit<8> BTH_OPCODE_ACK = 0x11;
const bit<8> BTH_OPCODE_CNP = 0x81;
/* The default partition (full member): the only P_Key hosts send (hosts/cells.py). */
const bit<16> BTH_PKEY_DEFAULT = 0xFFFF;

/* Tenant tags a host port never carries: the leaf assigns the tenant from the port. */
const bit<16> ETHERTYPE_VLAN = 0x8100;
const bit<16> ETHERTYPE_QINQ = 0x88A8;
const bit<16> VXLAN_UDP_PORT = 4789;

/* ECN codepoints (low two bits of the IPv4 TOS byte). */
const bit<2> ECN_NOT_ECT = 0;
const bit<2> ECN_CE      = 3;

/* INT-MD v2.1 over UDP; INT presence is DSCP == INT_DSCP (hosts/wire.py INT_DSCP). */
const bit<6>  INT_DSCP       = 0x17;
const bit<4>  INT_TYPE_MD    = 1;
const bit<4>  INT_VERSION    = 2;
const bit<8>  INT_MD_WORDS   = 3;    /* INT-MD header: 12 bytes */
const bit<16> INT_HEADERS_BYTES = 16; /* shim (4) + INT-MD header (12) */

/* Telemetry Report v2.0 */
const bit<4> REPORT_VERSION   = 2;
const bit<4> REPORT_TYPE_INT  = 1;
const bit<4> REPORT_IN_TYPE_ETHERNET = 3;
/* Sink's own metadata in a report: bit 1 (level-1 ingress/egress port) and bit 4 (ingress
 * timestamp) of RepMdBits -> 3 words. */
const bit<16> REPORT_MD_BITS  = 0x4800;
const bit<8>  REPORT_MD_WORDS = 3;

/* Spray modes of a next-hop group (group_mode table). */
const bit<2> MODE_ECMP        = 0;
const bit<2> MODE_SPRAY       = 1;
const bit<2> MODE_ROUND_ROBIN = 2;
const bit<2> MODE_ADAPTIVE    = 3;
/* Salt of a group without a group_mode entry: 0x10000 makes the salted key equal the hash. */
const bit<32> HASH_SALT_IDENTITY = 0x10000;

/* v1model instance_type values (simple_switch). */
const bit<32> INSTANCE_NORMAL        = 0;
const bit<32> INSTANCE_INGRESS_CLONE = 1;
const bit<32> INSTANCE_REPLICATION   = 5;

/* Index of drop_counter (packets dropped, by reason). */
const bit<8> DROP_NONE          = 0;
const bit<8> DROP_NO_ROUTE      = 1;
const bit<8> DROP_ISOLATION     = 2;
const bit<8> DROP_TTL           = 3;
const bit<8> DROP_BAD_PACKET    = 4;  /* parser error, bad IPv4 checksum, IPv4 options */
const bit<8> DROP_L2_MISS       = 5;
const bit<8> DROP_ACL           = 6;
const bit<8> DROP_SAME_PORT     = 7;  /* flooded copy back out of its ingress port (egress) */
const bit<8> DROP_NO_COLLECTOR  = 8;  /* report clone to a port without report_encap (egress) */
/* Refused at a host port (host_port_binding) or by the tenant check; see isolation.p4. */
const bit<8> DROP_SPOOF_MAC     = 9;  /* Ethernet source is not the port's host NIC */
const bit<8> DROP_SPOOF_IP      = 10; /* IPv4 source is not the port's host */
const bit<8> DROP_TENANT_TAG    = 11; /* VLAN tag, VXLAN header or non-default BTH P_Key */
const bit<8> DROP_FORGED_INT    = 12; /* INT metadata (or a non-MD shim) from a host */
const bit<8> DROP_FOREIGN_QP    = 13; /* RoCEv2 data to another tenant's host */
const bit<8> DROP_FOREIGN_FEEDBACK = 14; /* ACK/NAK/grant/CNP to another tenant's host */
#define DROP_REASON_SLOTS 16

/* Index of cell_counter. */
const bit<32> CELL_SPRAYED      = 0;  /* cell of the configured length, sent by group mode */
const bit<32> CELL_BAD_LENGTH   = 1;  /* RoCEv2 data packet of another length: flow-hashed */
#define CELL_SLOTS 2

/* Index of int_counter. */
const bit<32> INT_SOURCE_INSERT = 0;
const bit<32> INT_TRANSIT_PUSH  = 1;
const bit<32> INT_HOP_EXCEEDED  = 2;  /* RemainingHopCnt was 0: E flag set, nothing pushed */
const bit<32> INT_SKIPPED       = 3;  /* bitmap/Hop ML this switch cannot honour: nothing pushed */
const bit<32> INT_SINK_STRIP    = 4;
const bit<32> INT_REPORT        = 5;
const bit<32> INT_UNPARSED      = 6;  /* stack too long to strip; forwarded unchanged */
#define INT_SLOTS 8

#endif
