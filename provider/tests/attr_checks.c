/*
 * Attribute bits that either take effect or are refused, with the errno
 * Linux gives (issue 26: nothing accepted and ignored), on a device of
 * rnic's: ibv_modify_qp's port, address vector and path migration state,
 * ibv_create_qp_ex's send_ops_flags per transport, ibv_rereg_mr's flags.
 * Prints one line per check and exits non-zero if any is wrong.
 *   attr_checks DEVICE
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <infiniband/verbs.h>

static int failed;

static void check(const char *what, int got, int want)
{
	printf("%-60s %d (want %d)%s\n", what, got, want, got == want ? "" : "  WRONG");
	if (got != want)
		failed = 1;
}

static struct ibv_qp *qp_ex(struct ibv_context *c, struct ibv_pd *pd, struct ibv_cq *cq, enum ibv_qp_type t, uint64_t ops)
{
	struct ibv_qp_init_attr_ex a = {.send_cq = cq, .recv_cq = cq, .qp_type = t, .pd = pd,
					.cap = {.max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1},
					.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS, .send_ops_flags = ops};
	return ibv_create_qp_ex(c, &a);
}

int main(int argc, char **argv)
{
	int n;
	struct ibv_device **list = ibv_get_device_list(&n);
	struct ibv_device *dev = NULL;
	for (int i = 0; list && i < n; i++)
		if (argc > 1 && !strcmp(ibv_get_device_name(list[i]), argv[1]))
			dev = list[i];
	if (!dev) {
		fprintf(stderr, "no device %s\n", argc > 1 ? argv[1] : "(none named)");
		return 2;
	}
	struct ibv_context *c = ibv_open_device(dev);
	struct ibv_pd *pd = c ? ibv_alloc_pd(c) : NULL;
	struct ibv_cq *cq = pd ? ibv_create_cq(c, 16, NULL, NULL, 0) : NULL;
	if (!cq) {
		perror("open, alloc_pd or create_cq");
		return 2;
	}

	/* send_ops_flags: what each transport takes. */
	struct ibv_qp *q;
	errno = 0;
	q = qp_ex(c, pd, cq, IBV_QPT_UD, IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_RDMA_WRITE);
	check("create_qp_ex UD with RDMA_WRITE: errno", q ? 0 : errno, EOPNOTSUPP);
	q = qp_ex(c, pd, cq, IBV_QPT_UC, IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_RDMA_READ);
	check("create_qp_ex UC with RDMA_READ: errno", q ? 0 : errno, EOPNOTSUPP);
	q = qp_ex(c, pd, cq, IBV_QPT_UC, IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD);
	check("create_qp_ex UC with an atomic: errno", q ? 0 : errno, EOPNOTSUPP);
	q = qp_ex(c, pd, cq, IBV_QPT_UD, IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM);
	check("create_qp_ex UD with SEND, SEND_WITH_IMM: created", q != NULL, 1);
	if (q)
		ibv_destroy_qp(q);
	q = qp_ex(c, pd, cq, IBV_QPT_UC, IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM);
	check("create_qp_ex UC with SEND, WRITE_WITH_IMM: created", q != NULL, 1);
	if (q)
		ibv_destroy_qp(q);
	q = qp_ex(c, pd, cq, IBV_QPT_RC, IBV_QP_EX_WITH_RDMA_READ | IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP);
	check("create_qp_ex RC with READ and CAS: created", q != NULL, 1);

	/* ibv_modify_qp: the port, the address vector, path migration. */
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT, .pkey_index = 0, .port_num = 2,
				.qp_access_flags = IBV_ACCESS_REMOTE_WRITE};
	int mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
	check("modify_qp INIT on port 2", ibv_modify_qp(q, &a, mask), EINVAL);
	a.port_num = 0;
	check("modify_qp INIT on port 0", ibv_modify_qp(q, &a, mask), EINVAL);
	a.port_num = 1;
	check("modify_qp INIT on port 1", ibv_modify_qp(q, &a, mask), 0);
	union ibv_gid gid;
	ibv_query_gid(c, 1, 1, &gid);
	struct ibv_qp_attr r = {.qp_state = IBV_QPS_RTR, .path_mtu = IBV_MTU_1024, .dest_qp_num = q->qp_num, .rq_psn = 1,
				.max_dest_rd_atomic = 1, .min_rnr_timer = 12,
				.ah_attr = {.is_global = 0, .port_num = 1, .grh = {.dgid = gid, .sgid_index = 1, .hop_limit = 64}}};
	int rmask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
		    IBV_QP_MIN_RNR_TIMER;
	check("modify_qp RTR with an AV without a GRH (RoCE)", ibv_modify_qp(q, &r, rmask), EINVAL);
	r.ah_attr.is_global = 1;
	r.ah_attr.port_num = 0;
	check("modify_qp RTR with an AV on port 0", ibv_modify_qp(q, &r, rmask), EINVAL);
	r.ah_attr.port_num = 1;
	check("modify_qp RTR", ibv_modify_qp(q, &r, rmask), 0);
	/* Path migration is set from RTR to RTS on (IBTA 11.2.4.2). */
	struct ibv_qp_attr s = {.qp_state = IBV_QPS_RTS, .sq_psn = 1, .timeout = 14, .retry_cnt = 7, .rnr_retry = 7,
				.max_rd_atomic = 1, .path_mig_state = IBV_MIG_ARMED};
	int smask = IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC |
		    IBV_QP_PATH_MIG_STATE;
	check("modify_qp RTS arming path migration", ibv_modify_qp(q, &s, smask), EINVAL);
	s.path_mig_state = IBV_MIG_REARM;
	check("modify_qp RTS rearming path migration", ibv_modify_qp(q, &s, smask), EINVAL);
	s.path_mig_state = IBV_MIG_MIGRATED;
	check("modify_qp RTS, path migration MIGRATED", ibv_modify_qp(q, &s, smask), 0);
	struct ibv_qp_attr got;
	struct ibv_qp_init_attr init;
	memset(&got, 0xff, sizeof got);
	check("query_qp", ibv_query_qp(q, &got, IBV_QP_STATE | IBV_QP_PATH_MIG_STATE, &init), 0);
	check("query_qp: state RTS", got.qp_state, IBV_QPS_RTS);
	check("query_qp: path_mig_state MIGRATED", got.path_mig_state, IBV_MIG_MIGRATED);
	ibv_destroy_qp(q);

	/* ibv_rereg_mr: libibverbs' input checks, then the command's. */
	static char buf[4096];
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, sizeof buf, IBV_ACCESS_LOCAL_WRITE);
	if (!mr) {
		perror("reg_mr");
		return 2;
	}
	errno = 0;
	check("rereg_mr: an access without CHANGE_ACCESS", ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_PD, pd, NULL, 0, IBV_ACCESS_REMOTE_READ),
	      IBV_REREG_MR_ERR_INPUT);
	check("  errno", errno, EINVAL);
	errno = 0;
	check("rereg_mr: no flags", ibv_rereg_mr(mr, 0, NULL, NULL, 0, 0), IBV_REREG_MR_ERR_CMD);
	check("  errno", errno, EINVAL);
	check("rereg_mr: an unknown flag", ibv_rereg_mr(mr, 1 << 5, NULL, NULL, 0, 0), IBV_REREG_MR_ERR_INPUT);
	check("rereg_mr: CHANGE_ACCESS to remote read", ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0,
								     IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ), 0);
	ibv_dereg_mr(mr);
	ibv_destroy_cq(cq);
	ibv_dealloc_pd(pd);
	ibv_close_device(c);
	ibv_free_device_list(list);
	return failed;
}
