/*
 * Memory windows: the NIC allocates a window's key (ALLOC_MW); a bind is
 * a BIND_MW send WQE (type 2 windows: the program's IBV_WR_BIND_MW or
 * ibv_wr_bind_mw; type 1: ibv_bind_mw, which posts one), executed by the
 * NIC in send-queue order, completed as IBV_WC_BIND_MW.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>

#include <infiniband/verbs.h>

#include "hostif.h"
#include "rnic.h"

struct ibv_mw *rnic_alloc_mw(struct ibv_pd *pd, enum ibv_mw_type type)
{
	if (type != IBV_MW_TYPE_1 && type != IBV_MW_TYPE_2) {
		errno = EINVAL;
		return NULL;
	}
	struct hostif_msg m;
	hostif_begin(&m, HOSTIF_ALLOC_MW, 0);
	hostif_u32(&m, pd->handle);
	hostif_u8(&m, (uint8_t)type);
	int r = rnic_call(pd->context, &m, HOSTIF_ALLOC_MW, NULL, NULL);
	if (r) {
		errno = r;
		return NULL;
	}
	struct ibv_mw *mw = calloc(1, sizeof *mw);
	if (!mw) {
		errno = ENOMEM;
		return NULL;
	}
	mw->context = pd->context;
	mw->pd = pd;
	mw->handle = hostif_get_u32(&m);
	mw->rkey = hostif_get_u32(&m);
	mw->type = type;
	return mw;
}

int rnic_dealloc_mw(struct ibv_mw *mw)
{
	struct hostif_msg m;
	hostif_begin(&m, HOSTIF_DEALLOC_MW, 0);
	hostif_u32(&m, mw->handle);
	int r = rnic_call(mw->context, &m, HOSTIF_DEALLOC_MW, NULL, NULL);
	if (r)
		return r;
	free(mw);
	return 0;
}

/* ibv_bind_mw (type 1): a BIND_MW WQE with the window's next key; the
 * window takes the key now, as rdma-core's providers do (a bind that
 * fails completes in error and leaves the NIC's window as it was). */
int rnic_bind_mw(struct ibv_qp *qp, struct ibv_mw *mw, struct ibv_mw_bind *bind)
{
	if (mw->type != IBV_MW_TYPE_1 || (bind->bind_info.mr && bind->bind_info.mr->pd != qp->pd))
		return EINVAL;
	struct ibv_send_wr wr = {.wr_id = bind->wr_id, .opcode = IBV_WR_BIND_MW, .send_flags = bind->send_flags};
	wr.bind_mw.mw = mw;
	wr.bind_mw.rkey = ibv_inc_rkey(mw->rkey);
	wr.bind_mw.bind_info = bind->bind_info;
	struct ibv_send_wr *bad;
	int r = rnic_post_send(qp, &wr, &bad);
	if (r)
		return r;
	mw->rkey = wr.bind_mw.rkey;
	return 0;
}
