/*
 * What the repository's C tests of the provider share: two RC QPs
 * connected to each other in one process (rnic0 to rnic1, so that every
 * packet crosses link/udp), and a completion wait.
 */
#ifndef RNIC_TESTS_PAIR_H
#define RNIC_TESTS_PAIR_H

#include <infiniband/verbs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FAIL(...) do { fprintf(stderr, __VA_ARGS__); fprintf(stderr, "\n"); exit(1); } while (0)

/* connect_qp takes qp through INIT and RTR to RTS, its destination
 * peer (a QP whose GID, at index 1 of its device, is dgid), the remote
 * access allowed to it access. */
static inline void connect_qp(struct ibv_qp *qp, struct ibv_qp *peer, const union ibv_gid *dgid, int access)
{
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT, .port_num = 1, .qp_access_flags = access};
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
		FAIL("INIT");
	memset(&a, 0, sizeof a);
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = peer->qp_num;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 12;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = *dgid;
	a.ah_attr.grh.sgid_index = 1;
	a.ah_attr.grh.hop_limit = 64;
	a.ah_attr.port_num = 1;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
					  IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		FAIL("RTR");
	memset(&a, 0, sizeof a);
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = 1;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
					  IBV_QP_MAX_QP_RD_ATOMIC))
		FAIL("RTS");
}

/* wait_wc polls cq for one completion, which must be a success. */
static inline struct ibv_wc wait_wc(struct ibv_cq *cq)
{
	struct ibv_wc wc;
	for (long i = 0; i < 2000000000L; i++)
		if (ibv_poll_cq(cq, 1, &wc) == 1) {
			if (wc.status != IBV_WC_SUCCESS)
				FAIL("completion %s", ibv_wc_status_str(wc.status));
			return wc;
		}
	FAIL("no completion");
}

#endif
