/*
 * The two IBTA 1.5 operations between two machines, for interop checks
 * against Linux's rxe (scripts/interop.sh --nonposted): one RC QP each
 * side, connected through a TCP exchange of (QPN, PSN, GID, rkey, addr).
 *
 *   nonposted server DEVICE PORT   the responder: a 4096-byte region with
 *       remote write and FLUSH to global visibility (IB_ACCESS_FLUSH_GLOBAL,
 *       1 << 8: rdma-core 44 has no name for it), a QP that grants both;
 *       waits for the client to finish, then prints "word XXXXXXXXXXXXXXXX"
 *       (the 8 bytes at offset 64, in hex) and exits 0.
 *   nonposted client DEVICE HOST PORT   the requester: an ATOMIC WRITE of
 *       the bytes 11 22 .. 88 at offset 64 (ibv_wr_atomic_write), which must
 *       complete with IBV_WC_ATOMIC_WRITE; prints "atomic_write ok".
 *
 * The wire format of the exchange is this file's (not perftest's): five
 * fields in network order, 40 bytes; then one byte from the client when
 * it is done.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <endian.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#define FAIL(...) do { fprintf(stderr, __VA_ARGS__); fprintf(stderr, "\n"); exit(1); } while (0)
#define ACCESS_FLUSH_GLOBAL (1 << 8)

struct dest {
	uint32_t qpn, psn, rkey, pad;
	uint64_t addr;
	uint8_t gid[16];
};

static void xfer(int fd, struct dest *mine, struct dest *theirs)
{
	struct dest w = {htonl(mine->qpn), htonl(mine->psn), htonl(mine->rkey), 0, htobe64(mine->addr), {0}};
	memcpy(w.gid, mine->gid, 16);
	if (write(fd, &w, sizeof w) != sizeof w)
		FAIL("exchange write");
	size_t got = 0;
	while (got < sizeof w) {
		ssize_t n = read(fd, (char *)&w + got, sizeof w - got);
		if (n <= 0)
			FAIL("exchange read");
		got += (size_t)n;
	}
	theirs->qpn = ntohl(w.qpn);
	theirs->psn = ntohl(w.psn);
	theirs->rkey = ntohl(w.rkey);
	theirs->addr = be64toh(w.addr);
	memcpy(theirs->gid, w.gid, 16);
}

int main(int argc, char **argv)
{
	if (argc < 4)
		FAIL("usage: nonposted server DEVICE PORT | nonposted client DEVICE HOST PORT");
	int server = !strcmp(argv[1], "server");
	int n;
	struct ibv_device **list = ibv_get_device_list(&n), *dev = NULL;
	for (int i = 0; i < n; i++)
		if (!strcmp(ibv_get_device_name(list[i]), argv[2]))
			dev = list[i];
	if (!dev)
		FAIL("no device %s", argv[2]);
	struct ibv_context *c = ibv_open_device(dev);
	struct ibv_pd *pd = c ? ibv_alloc_pd(c) : NULL;
	struct ibv_cq *cq = pd ? ibv_create_cq(c, 16, NULL, NULL, 0) : NULL;
	if (!cq)
		FAIL("open/pd/cq: %m");
	static uint8_t buf[4096] __attribute__((aligned(4096)));
	int acc = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | (server ? ACCESS_FLUSH_GLOBAL : 0);
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, sizeof buf, acc);
	if (!mr)
		FAIL("reg_mr (access %#x): %m", acc);
	struct ibv_qp_init_attr_ex qa = {
		.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC, .pd = pd,
		.cap = {.max_send_wr = 8, .max_recv_wr = 8, .max_send_sge = 1, .max_recv_sge = 1},
		.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
		.send_ops_flags = IBV_QP_EX_WITH_ATOMIC_WRITE,
	};
	struct ibv_qp *qp = ibv_create_qp_ex(c, &qa);
	if (!qp)
		FAIL("create_qp_ex (ATOMIC WRITE): %m");

	/* The TCP exchange. */
	int fd;
	if (server) {
		int ls = socket(AF_INET, SOCK_STREAM, 0), one = 1;
		setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
		struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[3]))};
		if (bind(ls, (struct sockaddr *)&sa, sizeof sa) || listen(ls, 1))
			FAIL("listen: %m");
		printf("listening\n");
		fflush(stdout);
		fd = accept(ls, NULL, NULL);
		close(ls);
	} else {
		struct addrinfo *ai;
		if (argc < 5 || getaddrinfo(argv[3], argv[4], NULL, &ai))
			FAIL("address");
		fd = socket(AF_INET, SOCK_STREAM, 0);
		if (connect(fd, ai->ai_addr, ai->ai_addrlen))
			FAIL("connect: %m");
	}
	if (fd < 0)
		FAIL("accept: %m");
	struct dest me = {.qpn = qp->qp_num, .psn = 0x1234, .rkey = mr->rkey, .addr = (uintptr_t)buf}, peer;
	if (ibv_query_gid(c, 1, 1, (union ibv_gid *)me.gid))
		FAIL("query_gid");
	xfer(fd, &me, &peer);

	struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT, .port_num = 1,
				.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | (server ? ACCESS_FLUSH_GLOBAL : 0)};
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
		FAIL("INIT: %m");
	memset(&a, 0, sizeof a);
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = peer.qpn;
	a.rq_psn = peer.psn;
	a.max_dest_rd_atomic = 4;
	a.min_rnr_timer = 12;
	a.ah_attr.is_global = 1;
	memcpy(a.ah_attr.grh.dgid.raw, peer.gid, 16);
	a.ah_attr.grh.sgid_index = 1;
	a.ah_attr.grh.hop_limit = 64;
	a.ah_attr.port_num = 1;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
					  IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		FAIL("RTR: %m");
	memset(&a, 0, sizeof a);
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = me.psn;
	a.timeout = 18;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = 4;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
					  IBV_QP_MAX_QP_RD_ATOMIC))
		FAIL("RTS: %m");

	if (server) {
		char done;
		if (read(fd, &done, 1) != 1)
			FAIL("the client went away");
		printf("word ");
		for (int i = 0; i < 8; i++)
			printf("%02x", buf[64 + i]);
		printf("\n");
		return 0;
	}
	static const uint8_t word[8] = {0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88};
	struct ibv_qp_ex *qx = ibv_qp_to_qp_ex(qp);
	ibv_wr_start(qx);
	qx->wr_id = 7;
	qx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_atomic_write(qx, peer.rkey, peer.addr + 64, word);
	if (ibv_wr_complete(qx))
		FAIL("wr_complete: %m");
	struct ibv_wc wc;
	int k;
	for (int i = 0; (k = ibv_poll_cq(cq, 1, &wc)) == 0 && i < 20000000; i++)
		;
	if (k != 1 || wc.status != IBV_WC_SUCCESS || wc.opcode != IBV_WC_ATOMIC_WRITE || wc.wr_id != 7)
		FAIL("ATOMIC WRITE completion: %d, status %s, opcode %d", k, k == 1 ? ibv_wc_status_str(wc.status) : "-", k == 1 ? (int)wc.opcode : -1);
	printf("atomic_write ok\n");
	char done = 1;
	if (write(fd, &done, 1) != 1)
		FAIL("done");
	return 0;
}
