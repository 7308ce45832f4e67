/*
 * Prints what libibverbs' calls that need no device answer, over their
 * whole domain and some values beyond it: the names of events, node
 * types, port states and completion statuses, the rate conversions, the
 * ibv_copy_*_kern copies of a patterned structure into a patterned one,
 * and ibv_init_ah_from_wc without a GRH. cmd/rnic/abi_test.go runs it on
 * rnic's libibverbs.so.1 and on the system's (rdma-core's) and wants the
 * same output.
 */
#include <infiniband/sa.h>
#include <infiniband/verbs.h>
#include <rdma/ib_user_sa.h>
#include <rdma/ib_user_verbs.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* Exported by libibverbs, declared in no installed header. */
void ibv_copy_path_rec_to_kern(struct ib_user_path_rec *dst, struct ibv_sa_path_rec *src);
void ibv_copy_path_rec_from_kern(struct ibv_sa_path_rec *dst, struct ib_user_path_rec *src);
void ibv_copy_ah_attr_from_kern(struct ibv_ah_attr *dst, struct ib_uverbs_ah_attr *src);
void ibv_copy_qp_attr_from_kern(struct ibv_qp_attr *dst, struct ib_uverbs_qp_attr *src);

static void pattern(void *p, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		((uint8_t *)p)[i] = (uint8_t)(i * 37 + seed);
}

static void hex(const char *what, const void *p, size_t n)
{
	printf("%s", what);
	for (size_t i = 0; i < n; i++)
		printf("%s%02x", i % 32 ? "" : "\n  ", ((const uint8_t *)p)[i]);
	printf("\n");
}

int main(void)
{
	for (int i = -2; i < 30; i++)
		printf("event %d: %s\n", i, ibv_event_type_str((enum ibv_event_type)i));
	for (int i = -2; i < 12; i++)
		printf("node %d: %s\n", i, ibv_node_type_str((enum ibv_node_type)i));
	for (int i = -2; i < 10; i++)
		printf("port state %d: %s\n", i, ibv_port_state_str((enum ibv_port_state)i));
	for (int i = -2; i < 30; i++)
		printf("wc status %d: %s\n", i, ibv_wc_status_str((enum ibv_wc_status)i));
	for (int i = -2; i < 30; i++) {
		int mbps = ibv_rate_to_mbps((enum ibv_rate)i), mult = ibv_rate_to_mult((enum ibv_rate)i);
		printf("rate %d: %d Mb/s (back %d), mult %d (back %d)\n", i, mbps, mbps_to_ibv_rate(mbps), mult, mult_to_ibv_rate(mult));
	}
	for (int m = -1; m <= 500; m++)
		if (mult_to_ibv_rate(m) != IBV_RATE_MAX)
			printf("mult %d: rate %d\n", m, mult_to_ibv_rate(m));
	const int mbps[] = {0, 1, 2500, 10000, 14062, 14063, 25000, 25781, 100000, 103125, 200000, 1275000, -1};
	for (size_t i = 0; i < sizeof mbps / sizeof mbps[0]; i++)
		printf("mbps %d: rate %d\n", mbps[i], mbps_to_ibv_rate(mbps[i]));

	struct ibv_sa_path_rec sa;
	struct ib_user_path_rec k;
	pattern(&sa, sizeof sa, 11);
	memset(&k, 0xee, sizeof k);
	ibv_copy_path_rec_to_kern(&k, &sa);
	hex("path_rec_to_kern", &k, sizeof k);
	pattern(&k, sizeof k, 13);
	memset(&sa, 0xee, sizeof sa);
	ibv_copy_path_rec_from_kern(&sa, &k);
	hex("path_rec_from_kern", &sa, sizeof sa);
	struct ib_uverbs_ah_attr kah;
	struct ibv_ah_attr ah;
	pattern(&kah, sizeof kah, 17);
	memset(&ah, 0xee, sizeof ah);
	ibv_copy_ah_attr_from_kern(&ah, &kah);
	hex("ah_attr_from_kern", &ah, sizeof ah);
	struct ib_uverbs_qp_attr kqa;
	struct ibv_qp_attr qa;
	pattern(&kqa, sizeof kqa, 19);
	memset(&qa, 0xee, sizeof qa);
	ibv_copy_qp_attr_from_kern(&qa, &kqa);
	hex("qp_attr_from_kern", &qa, sizeof qa);

	/* Without a GRH the context is not used: NULL on either library. */
	struct ibv_wc wc;
	struct ibv_grh grh;
	pattern(&wc, sizeof wc, 23);
	wc.wc_flags &= ~IBV_WC_GRH;
	pattern(&grh, sizeof grh, 29);
	memset(&ah, 0xee, sizeof ah);
	int r = ibv_init_ah_from_wc(NULL, 7, &wc, &grh, &ah);
	printf("init_ah_from_wc without GRH: %d\n", r);
	hex("ah_attr", &ah, sizeof ah);
	return 0;
}
