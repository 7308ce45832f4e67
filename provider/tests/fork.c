/*
 * fork() in a program with registered memory, through rnic's
 * libibverbs.so.1 (issue 11: fork must be safe). Two QPs on two NICs
 * (the first two devices), connected in this process, each with a
 * registered buffer; then fork(). The hazard on pinning hardware: after
 * fork the registered pages are copy-on-write, the parent's first store
 * gives the parent new pages, and the NIC goes on reaching the old ones,
 * now the child's. rnic pins nothing (it reaches the pages as they are
 * at each DMA), so ibv_fork_init has nothing to do and says
 * IBV_FORK_UNNEEDED. Checked here:
 *   - after the parent has written to both buffers (breaking the sharing),
 *     an RDMA WRITE carries the parent's new data into the parent's
 *     target pages, and an RDMA READ reads the parent's;
 *   - the child's copies keep what they held at fork (no DMA reached
 *     them), and the child can open the device and register memory of
 *     its own;
 *   - the child's exit (it closes its inherited copies of the parent's
 *     connection) tears nothing of the parent's down: a SEND works after.
 * Prints "ok" and exits 0, or says what failed and exits 1.
 */
#include "pair.h"
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define LEN (3 * 4096)

struct side {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	union ibv_gid gid;
	char *buf;
};

static void open_side(struct ibv_device *dev, struct side *s)
{
	if (!(s->ctx = ibv_open_device(dev)))
		FAIL("open %s", ibv_get_device_name(dev));
	if (!(s->pd = ibv_alloc_pd(s->ctx)) || !(s->cq = ibv_create_cq(s->ctx, 16, NULL, NULL, 0)))
		FAIL("pd/cq");
	struct ibv_qp_init_attr a = {
		.send_cq = s->cq, .recv_cq = s->cq, .qp_type = IBV_QPT_RC,
		.cap = {.max_send_wr = 8, .max_recv_wr = 8, .max_send_sge = 1, .max_recv_sge = 1},
	};
	if (!(s->qp = ibv_create_qp(s->pd, &a)))
		FAIL("ibv_create_qp: %m");
	/* Page-aligned, so that the copy-on-write break is whole pages. */
	if (posix_memalign((void **)&s->buf, 4096, LEN))
		FAIL("posix_memalign");
	memset(s->buf, 0, LEN);
	if (!(s->mr = ibv_reg_mr(s->pd, s->buf, LEN,
				 IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ)))
		FAIL("reg_mr: %m");
	if (ibv_query_gid(s->ctx, 1, 1, &s->gid))
		FAIL("query_gid");
}

static void connect_to(struct side *s, struct side *peer)
{
	connect_qp(s->qp, peer->qp, &peer->gid, IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
}

/* rdma posts one signaled RDMA WRITE or READ of LEN bytes between a's
 * and b's buffers and waits for it. */
static void rdma(struct side *a, struct side *b, enum ibv_wr_opcode op)
{
	struct ibv_sge sge = {.addr = (uintptr_t)a->buf, .length = LEN, .lkey = a->mr->lkey};
	struct ibv_send_wr wr = {.wr_id = op, .sg_list = &sge, .num_sge = 1, .opcode = op, .send_flags = IBV_SEND_SIGNALED,
				 .wr.rdma = {.remote_addr = (uintptr_t)b->buf, .rkey = b->mr->rkey}},
			   *bad;
	if (ibv_post_send(a->qp, &wr, &bad))
		FAIL("post_send: %m");
	wait_wc(a->cq);
}

static void fill(char *p, char seed)
{
	for (int i = 0; i < LEN; i++)
		p[i] = (char)(seed + i * 13);
}

static int same(const char *p, char seed)
{
	for (int i = 0; i < LEN; i++)
		if (p[i] != (char)(seed + i * 13))
			return 0;
	return 1;
}

/* child is the forked process: its copies hold what they held at fork,
 * whatever the parent's RDMA did meanwhile; and it can use the device
 * through contexts of its own. */
static int child(struct side *a, struct side *b, int go)
{
	char c;
	if (read(go, &c, 1) != 1) /* the parent's RDMA is done */
		return 10;
	if (!same(a->buf, 1) || !same(b->buf, 2))
		return 11; /* a DMA of the parent's reached the child's pages */
	int n;
	struct ibv_device **devs = ibv_get_device_list(&n);
	if (!devs || n < 1)
		return 12;
	struct ibv_context *ctx = ibv_open_device(devs[0]);
	struct ibv_pd *pd = ctx ? ibv_alloc_pd(ctx) : NULL;
	struct ibv_mr *mr = pd ? ibv_reg_mr(pd, a->buf, LEN, IBV_ACCESS_LOCAL_WRITE) : NULL;
	if (!mr)
		return 13;
	if (ibv_dereg_mr(mr) || ibv_dealloc_pd(pd) || ibv_close_device(ctx))
		return 14;
	ibv_free_device_list(devs);
	return 0; /* exit(): the inherited connection's copies close */
}

int main(void)
{
	if (ibv_fork_init())
		FAIL("ibv_fork_init: %m");
	if (ibv_is_fork_initialized() != IBV_FORK_UNNEEDED)
		FAIL("ibv_is_fork_initialized: %d, want IBV_FORK_UNNEEDED", ibv_is_fork_initialized());
	int n;
	struct ibv_device **devs = ibv_get_device_list(&n);
	if (!devs || n < 2)
		FAIL("%d devices, want 2", n);
	static struct side a, b;
	open_side(devs[0], &a);
	open_side(devs[1], &b);
	connect_to(&a, &b);
	connect_to(&b, &a);
	fill(a.buf, 1);
	fill(b.buf, 2);
	rdma(&a, &b, IBV_WR_RDMA_WRITE); /* the pages are the NIC's to reach before fork too */
	if (!same(b.buf, 1))
		FAIL("the WRITE before fork differs");
	fill(b.buf, 2);

	int p[2];
	if (pipe(p))
		FAIL("pipe");
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0)
		FAIL("fork: %m");
	if (pid == 0) {
		close(p[1]);
		exit(child(&a, &b, p[0]));
	}
	close(p[0]);

	/* The parent writes first: its pages are copied, the child keeps
	 * the ones registered before fork. */
	fill(a.buf, 3);
	fill(b.buf, 4);
	rdma(&a, &b, IBV_WR_RDMA_WRITE);
	if (!same(b.buf, 3))
		FAIL("after fork, the WRITE did not reach the parent's pages (or carried the child's data)");
	fill(b.buf, 5);
	rdma(&a, &b, IBV_WR_RDMA_READ);
	if (!same(a.buf, 5))
		FAIL("after fork, the READ did not read the parent's pages");

	if (write(p[1], "g", 1) != 1)
		FAIL("pipe write");
	int st;
	if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
		FAIL("child: status %#x (10 pipe, 11 its pages changed, 12-14 its own verbs)", st);

	/* The child has exited: the parent's objects serve on. */
	struct ibv_sge rs = {.addr = (uintptr_t)b.buf, .length = 64, .lkey = b.mr->lkey};
	struct ibv_recv_wr rw = {.wr_id = 7, .sg_list = &rs, .num_sge = 1}, *rbad;
	if (ibv_post_recv(b.qp, &rw, &rbad))
		FAIL("post_recv after the child's exit: %m");
	fill(a.buf, 6);
	struct ibv_sge ss = {.addr = (uintptr_t)a.buf, .length = 64, .lkey = a.mr->lkey};
	struct ibv_send_wr sw = {.wr_id = 8, .sg_list = &ss, .num_sge = 1, .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED},
			   *sbad;
	if (ibv_post_send(a.qp, &sw, &sbad))
		FAIL("post_send after the child's exit: %m");
	wait_wc(a.cq);
	struct ibv_wc wc = wait_wc(b.cq);
	if (wc.wr_id != 7 || wc.byte_len != 64 || memcmp(b.buf, a.buf, 64))
		FAIL("the SEND after the child's exit: wr_id %llu len %u", (unsigned long long)wc.wr_id, wc.byte_len);
	printf("ok\n");
	return 0;
}
