/*
 * The verbs that need no NIC: the names of enumerations
 * (ibv_event_type_str, ibv_node_type_str, ibv_port_state_str), the
 * conversions between static rates and their multiples of 2.5 Gb/s or
 * Mb/s, ibv_init_ah_from_wc (an address vector back to the sender of a
 * receive, from its completion and GRH), the copies between libibverbs'
 * and the kernel's structures that rdma-core exports for its other
 * libraries (ibv_copy_*_kern), and ibv_reg_mr_iova. Each answers as
 * rdma-core 44's libibverbs does: a program that prints a name or
 * compares a rate sees what it would see on rdma-core.
 */
#define _GNU_SOURCE
#include <endian.h>
#include <errno.h>
#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <infiniband/sa.h>
#include <infiniband/verbs.h>
#include <rdma/ib_user_sa.h>
#include <rdma/ib_user_verbs.h>

/* --- Names --- */

/* name returns names[i], or "unknown" for a value the table does not
 * name (out of range, or a hole): the string rdma-core returns. */
static const char *name(const char *const *names, size_t n, long i)
{
	if (i < 0 || (size_t)i >= n || !names[i])
		return "unknown";
	return names[i];
}

#define NAME(table, i) name(table, sizeof table / sizeof table[0], (long)(i))

const char *ibv_node_type_str(enum ibv_node_type node_type)
{
	static const char *const names[] = {
		[IBV_NODE_CA] = "InfiniBand channel adapter",
		[IBV_NODE_SWITCH] = "InfiniBand switch",
		[IBV_NODE_ROUTER] = "InfiniBand router",
		[IBV_NODE_RNIC] = "iWARP NIC",
		[IBV_NODE_USNIC] = "usNIC",
		[IBV_NODE_USNIC_UDP] = "usNIC UDP",
		[IBV_NODE_UNSPECIFIED] = "unspecified",
	};
	return NAME(names, node_type);
}

const char *ibv_port_state_str(enum ibv_port_state port_state)
{
	static const char *const names[] = {
		[IBV_PORT_NOP] = "no state change (NOP)",
		[IBV_PORT_DOWN] = "down",
		[IBV_PORT_INIT] = "init",
		[IBV_PORT_ARMED] = "armed",
		[IBV_PORT_ACTIVE] = "active",
		[IBV_PORT_ACTIVE_DEFER] = "active defer",
	};
	return NAME(names, port_state);
}

const char *ibv_event_type_str(enum ibv_event_type event)
{
	static const char *const names[] = {
		[IBV_EVENT_CQ_ERR] = "CQ error",
		[IBV_EVENT_QP_FATAL] = "local work queue catastrophic error",
		[IBV_EVENT_QP_REQ_ERR] = "invalid request local work queue error",
		[IBV_EVENT_QP_ACCESS_ERR] = "local access violation work queue error",
		[IBV_EVENT_COMM_EST] = "communication established",
		[IBV_EVENT_SQ_DRAINED] = "send queue drained",
		[IBV_EVENT_PATH_MIG] = "path migrated",
		[IBV_EVENT_PATH_MIG_ERR] = "path migration request error",
		[IBV_EVENT_DEVICE_FATAL] = "local catastrophic error",
		[IBV_EVENT_PORT_ACTIVE] = "port active",
		[IBV_EVENT_PORT_ERR] = "port error",
		[IBV_EVENT_LID_CHANGE] = "LID change",
		[IBV_EVENT_PKEY_CHANGE] = "P_Key change",
		[IBV_EVENT_SM_CHANGE] = "SM change",
		[IBV_EVENT_SRQ_ERR] = "SRQ catastrophic error",
		[IBV_EVENT_SRQ_LIMIT_REACHED] = "SRQ limit reached",
		[IBV_EVENT_QP_LAST_WQE_REACHED] = "last WQE reached",
		[IBV_EVENT_CLIENT_REREGISTER] = "client reregistration",
		[IBV_EVENT_GID_CHANGE] = "GID table change",
		[IBV_EVENT_WQ_FATAL] = "WQ fatal",
	};
	return NAME(names, event);
}

/* --- Static rates --- */

/* Each rate of enum ibv_rate: its multiple of the 2.5 Gb/s of a 1X SDR
 * link (0: none, the rates of the 64b/66b encodings that are not such a
 * multiple) and its data rate in Mb/s as rdma-core reckons it (the
 * signalling rate of the link's lanes: 100 Gb/s, four EDR lanes, is
 * 103125). The values are rdma-core's, so that a program converting in
 * either direction gets the same answer. */
static const struct {
	enum ibv_rate rate;
	int mult;
	int mbps;
} rates[] = {
	{IBV_RATE_2_5_GBPS, 1, 2500},	   {IBV_RATE_5_GBPS, 2, 5000},	       {IBV_RATE_10_GBPS, 4, 10000},
	{IBV_RATE_20_GBPS, 8, 20000},	   {IBV_RATE_30_GBPS, 12, 30000},      {IBV_RATE_40_GBPS, 16, 40000},
	{IBV_RATE_60_GBPS, 24, 60000},	   {IBV_RATE_80_GBPS, 32, 80000},      {IBV_RATE_120_GBPS, 48, 120000},
	{IBV_RATE_14_GBPS, 0, 14062},	   {IBV_RATE_56_GBPS, 0, 56250},       {IBV_RATE_112_GBPS, 0, 112500},
	{IBV_RATE_168_GBPS, 0, 168750},	   {IBV_RATE_25_GBPS, 0, 25781},       {IBV_RATE_100_GBPS, 0, 103125},
	{IBV_RATE_200_GBPS, 0, 206250},	   {IBV_RATE_300_GBPS, 0, 309375},     {IBV_RATE_28_GBPS, 11, 28125},
	{IBV_RATE_50_GBPS, 20, 53125},	   {IBV_RATE_400_GBPS, 160, 425000},   {IBV_RATE_600_GBPS, 240, 637500},
	{IBV_RATE_800_GBPS, 320, 850000},  {IBV_RATE_1200_GBPS, 480, 1275000},
};

enum { NRATES = sizeof rates / sizeof rates[0] };

/* ibv_rate_to_mult: rate as a multiple of 2.5 Gb/s, or -1 if it is none
 * (IBV_RATE_MAX, or a rate of the 64b/66b encodings). */
__attribute__((const)) int ibv_rate_to_mult(enum ibv_rate rate)
{
	for (int i = 0; i < NRATES; i++)
		if (rates[i].rate == rate)
			return rates[i].mult ? rates[i].mult : -1;
	return -1;
}

/* mult_to_ibv_rate: the rate of a multiple of 2.5 Gb/s, or IBV_RATE_MAX
 * if no rate is that multiple. */
__attribute__((const)) enum ibv_rate mult_to_ibv_rate(int mult)
{
	for (int i = 0; mult > 0 && i < NRATES; i++)
		if (rates[i].mult == mult)
			return rates[i].rate;
	return IBV_RATE_MAX;
}

/* ibv_rate_to_mbps: rate in Mb/s, or -1 for IBV_RATE_MAX or a value that
 * is no rate. */
__attribute__((const)) int ibv_rate_to_mbps(enum ibv_rate rate)
{
	for (int i = 0; i < NRATES; i++)
		if (rates[i].rate == rate)
			return rates[i].mbps;
	return -1;
}

/* mbps_to_ibv_rate: the rate of exactly mbps (as ibv_rate_to_mbps
 * gives it), or IBV_RATE_MAX. */
__attribute__((const)) enum ibv_rate mbps_to_ibv_rate(int mbps)
{
	for (int i = 0; i < NRATES; i++)
		if (rates[i].mbps == mbps)
			return rates[i].rate;
	return IBV_RATE_MAX;
}

/* --- ibv_init_ah_from_wc --- */

/* find_gid returns the index of gid in the port's GID table among the
 * entries of type v2 (RoCE v2) or not v2 (IB, RoCE v1), or -1 with errno
 * ENOENT if the table holds no such entry: the packet was not sent to
 * an address of this port. */
static int find_gid(struct ibv_context *c, uint8_t port, const uint8_t *gid, int v2)
{
	struct ibv_port_attr pa;
	int r = ibv_query_port(c, port, &pa);
	if (r) {
		errno = r; /* ibv_query_port returns it */
		return -1;
	}
	for (int i = 0; i < pa.gid_tbl_len; i++) {
		struct ibv_gid_entry e;
		if (ibv_query_gid_ex(c, port, (uint32_t)i, &e, 0))
			continue; /* an empty entry (ENODATA) */
		if ((e.gid_type == IBV_GID_TYPE_ROCE_V2) == v2 && !memcmp(e.gid.raw, gid, 16))
			return i;
	}
	errno = ENOENT;
	return -1;
}

/* ipv4_header_ok says whether the 20 bytes at h are an IPv4 header
 * without options whose checksum holds. */
static int ipv4_header_ok(const uint8_t *h)
{
	if (h[0] != 0x45)
		return 0;
	uint32_t sum = 0;
	for (int i = 0; i < 20; i += 2)
		sum += (uint32_t)h[i] << 8 | h[i + 1];
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return sum == 0xffff; /* the one's complement sum over a valid header, its checksum included */
}

static void v4_mapped(uint8_t *gid, const uint8_t *addr)
{
	memset(gid, 0, 10);
	gid[10] = gid[11] = 0xff;
	memcpy(gid + 12, addr, 4);
}

/*
 * ibv_init_ah_from_wc fills ah_attr with the address vector back to the
 * sender of the receive that completed as wc, whose first 40 bytes (the
 * GRH area, when wc has IBV_WC_GRH) are grh: as ibv_create_ah_from_wc(3)
 * and rdma-core describe it. Without a GRH the vector is the LID fields
 * of the completion. With one, the 40 bytes hold either an IPv6 header
 * (RoCE v2 over IPv6, or the GRH of IB and RoCE v1) or, for RoCE v2 over
 * IPv4, the IPv4 header in their last 20 bytes (ibv_wc(3)); the source
 * GID index is the entry of the port's table the packet was addressed
 * to, of the packet's RoCE version. 0, or -1 with errno: EINVAL for a
 * multicast destination (no GID table entry is one), EPROTONOSUPPORT for
 * a header that is neither, ENOENT if no entry of the port is the
 * packet's destination.
 */
int ibv_init_ah_from_wc(struct ibv_context *context, uint8_t port_num, struct ibv_wc *wc, struct ibv_grh *grh,
			struct ibv_ah_attr *ah_attr)
{
	memset(ah_attr, 0, sizeof *ah_attr);
	ah_attr->dlid = wc->slid;
	ah_attr->sl = wc->sl;
	ah_attr->src_path_bits = wc->dlid_path_bits;
	ah_attr->port_num = port_num;
	/* rdma-core takes the flow label from grh with or without a GRH
	 * (it is ignored when is_global is 0); so does this, when there is
	 * a grh to read. */
	uint32_t vtf = grh ? be32toh(grh->version_tclass_flow) : 0;
	ah_attr->grh.flow_label = vtf & 0xfffff;
	if (!(wc->wc_flags & IBV_WC_GRH))
		return 0;
	if (!grh) {
		errno = EINVAL;
		return -1;
	}
	const uint8_t *ip4 = (const uint8_t *)grh + 20;
	ah_attr->is_global = 1;
	/* Which header: an IPv6 header starts with version 6. The first 20
	 * bytes of an IPv4 packet's area are undefined and may start so too,
	 * so an IPv4 header whose checksum holds in the last 20 wins. */
	int v4;
	if (vtf >> 28 != 6) {
		if (ip4[0] >> 4 != 4) {
			errno = EPROTONOSUPPORT;
			return -1;
		}
		v4 = 1;
	} else {
		v4 = ipv4_header_ok(ip4);
	}
	int idx;
	if (v4) {
		const uint8_t *src = ip4 + 12, *dst = ip4 + 16;
		if ((dst[0] & 0xf0) == 0xe0) { /* 224.0.0.0/4 */
			errno = EINVAL;
			return -1;
		}
		uint8_t dgid[16];
		v4_mapped(dgid, dst);
		if ((idx = find_gid(context, port_num, dgid, 1)) < 0)
			return -1;
		v4_mapped(ah_attr->grh.dgid.raw, src);
		ah_attr->grh.hop_limit = ip4[8]; /* TTL */
		ah_attr->grh.traffic_class = ip4[1];
	} else {
		if (grh->dgid.raw[0] == 0xff) { /* multicast */
			errno = EINVAL;
			return -1;
		}
		int v2;
		if (grh->next_hdr == IPPROTO_UDP)
			v2 = 1; /* RoCE v2 */
		else if (grh->next_hdr == 0x1b)
			v2 = 0; /* the IBA's next header value for a BTH: IB or RoCE v1 */
		else {
			errno = EPROTONOSUPPORT;
			return -1;
		}
		if ((idx = find_gid(context, port_num, grh->dgid.raw, v2)) < 0)
			return -1;
		ah_attr->grh.dgid = grh->sgid;
		ah_attr->grh.hop_limit = grh->hop_limit;
		ah_attr->grh.traffic_class = (vtf >> 20) & 0xff;
	}
	ah_attr->grh.sgid_index = (uint8_t)idx;
	return 0;
}

/* --- Structures of the kernel's ABI ---
 *
 * rdma-core exports these copies for its other libraries (librdmacm
 * reads path records and QP attributes from the kernel's rdma_cm); they
 * convert field by field, the two layouts differing. */

void ibv_copy_path_rec_to_kern(struct ib_user_path_rec *dst, struct ibv_sa_path_rec *src)
{
	memcpy(dst->dgid, src->dgid.raw, sizeof dst->dgid);
	memcpy(dst->sgid, src->sgid.raw, sizeof dst->sgid);
	dst->dlid = src->dlid;
	dst->slid = src->slid;
	dst->raw_traffic = (uint32_t)src->raw_traffic;
	dst->flow_label = src->flow_label;
	dst->hop_limit = src->hop_limit;
	dst->traffic_class = src->traffic_class;
	dst->reversible = (uint32_t)src->reversible;
	dst->numb_path = src->numb_path;
	dst->pkey = src->pkey;
	dst->sl = src->sl;
	dst->mtu_selector = src->mtu_selector;
	dst->mtu = src->mtu;
	dst->rate_selector = src->rate_selector;
	dst->rate = src->rate;
	dst->packet_life_time = src->packet_life_time;
	dst->preference = src->preference;
	dst->packet_life_time_selector = src->packet_life_time_selector;
}

void ibv_copy_path_rec_from_kern(struct ibv_sa_path_rec *dst, struct ib_user_path_rec *src)
{
	memcpy(dst->dgid.raw, src->dgid, sizeof dst->dgid);
	memcpy(dst->sgid.raw, src->sgid, sizeof dst->sgid);
	dst->dlid = src->dlid;
	dst->slid = src->slid;
	dst->raw_traffic = (int)src->raw_traffic;
	dst->flow_label = src->flow_label;
	dst->hop_limit = src->hop_limit;
	dst->traffic_class = src->traffic_class;
	dst->reversible = (int)src->reversible;
	dst->numb_path = src->numb_path;
	dst->pkey = src->pkey;
	dst->sl = src->sl;
	dst->mtu_selector = src->mtu_selector;
	dst->mtu = src->mtu;
	dst->rate_selector = src->rate_selector;
	dst->rate = src->rate;
	dst->packet_life_time = src->packet_life_time;
	dst->preference = src->preference;
	dst->packet_life_time_selector = src->packet_life_time_selector;
}

void ibv_copy_ah_attr_from_kern(struct ibv_ah_attr *dst, struct ib_uverbs_ah_attr *src)
{
	memcpy(dst->grh.dgid.raw, src->grh.dgid, sizeof dst->grh.dgid);
	dst->grh.flow_label = src->grh.flow_label;
	dst->grh.sgid_index = src->grh.sgid_index;
	dst->grh.hop_limit = src->grh.hop_limit;
	dst->grh.traffic_class = src->grh.traffic_class;
	dst->dlid = src->dlid;
	dst->sl = src->sl;
	dst->src_path_bits = src->src_path_bits;
	dst->static_rate = src->static_rate;
	dst->is_global = src->is_global;
	dst->port_num = src->port_num;
}

void ibv_copy_qp_attr_from_kern(struct ibv_qp_attr *dst, struct ib_uverbs_qp_attr *src)
{
	dst->cur_qp_state = src->cur_qp_state;
	dst->path_mtu = src->path_mtu;
	dst->path_mig_state = src->path_mig_state;
	dst->qkey = src->qkey;
	dst->rq_psn = src->rq_psn;
	dst->sq_psn = src->sq_psn;
	dst->dest_qp_num = src->dest_qp_num;
	dst->qp_access_flags = src->qp_access_flags;
	dst->cap.max_send_wr = src->max_send_wr;
	dst->cap.max_recv_wr = src->max_recv_wr;
	dst->cap.max_send_sge = src->max_send_sge;
	dst->cap.max_recv_sge = src->max_recv_sge;
	dst->cap.max_inline_data = src->max_inline_data;
	ibv_copy_ah_attr_from_kern(&dst->ah_attr, &src->ah_attr);
	ibv_copy_ah_attr_from_kern(&dst->alt_ah_attr, &src->alt_ah_attr);
	dst->pkey_index = src->pkey_index;
	dst->alt_pkey_index = src->alt_pkey_index;
	dst->en_sqd_async_notify = src->en_sqd_async_notify;
	dst->sq_draining = src->sq_draining;
	dst->max_rd_atomic = src->max_rd_atomic;
	dst->max_dest_rd_atomic = src->max_dest_rd_atomic;
	dst->min_rnr_timer = src->min_rnr_timer;
	dst->port_num = src->port_num;
	dst->timeout = src->timeout;
	dst->retry_cnt = src->retry_cnt;
	dst->rnr_retry = src->rnr_retry;
	dst->alt_port_num = src->alt_port_num;
	dst->alt_timeout = src->alt_timeout;
}

/* --- Memory regions --- */

/* ibv_reg_mr_iova (IBVERBS_1.7): a region whose first byte the peer
 * names iova, with the access flags of ibv_reg_mr. verbs.h's
 * ibv_reg_mr_iova macro calls it when the flags are a constant without
 * optional ones (ibv_reg_mr_iova2 otherwise), so programs built today
 * import it too. */
#undef ibv_reg_mr_iova
struct ibv_mr *ibv_reg_mr_iova(struct ibv_pd *pd, void *addr, size_t length, uint64_t iova, int access)
{
	return ibv_reg_mr_iova2(pd, addr, length, iova, (unsigned int)access);
}
