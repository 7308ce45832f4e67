/*
 * rsockets as a program uses them, beyond what rstream does: run as
 *   rsocket server ADDR PORT      (serves one client, then exits)
 *   rsocket client ADDR PORT [SRC]
 *   rsocket hold ADDR PORT [SRC]  (connects, creates the file named by
 *                                  $RSOCKET_READY, waits to be killed)
 *   rsocket victim ADDR PORT      (serves one "hold" client: a blocking
 *                                  rrecv must end once the client dies)
 *   rsocket strict ADDR PORT      (listens, creates $RSOCKET_READY, and
 *                                  serves one "rogue" client: raccept
 *   rsocket rogue ADDR PORT        refuses connection data that is not an
 *                                  rsocket's, and a peer that sends more
 *                                  than its credits ends the connection
 *                                  with EPROTO, no read outside the buffer)
 * Server and client check, in order: the names of both ends; socket
 * options; a non-blocking read with nothing there (EAGAIN) and rpoll's
 * timeout; MSG_PEEK; 8 MiB in writes of odd sizes and several iovecs,
 * read back in other sizes and checked byte for byte; MSG_WAITALL;
 * riomap/riowrite into the server's buffer; the client's half close
 * (SHUT_WR: the server reads the end of the stream, then answers) and
 * the server's close (the client reads the answer, then the end). Each
 * prints "ok" at the end, or what failed and exits 1.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/time.h>
#include <unistd.h>

#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>
#include <rdma/rsocket.h>

#define TOTAL (8 << 20)
#define IOMAP_LEN 65536

#define CHECK(cond, ...)                                   \
	do {                                               \
		if (!(cond)) {                             \
			fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
			fprintf(stderr, __VA_ARGS__);      \
			fprintf(stderr, " (errno %d %s)\n", errno, strerror(errno)); \
			exit(1);                           \
		}                                          \
	} while (0)

static uint8_t pattern(size_t i) { return (uint8_t)(i * 7 + (i >> 13)); }

static struct sockaddr_in addr_of(const char *ip, int port)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
	CHECK(inet_pton(AF_INET, ip, &a.sin_addr) == 1, "bad address %s", ip);
	return a;
}

static void read_full(int s, void *buf, size_t len)
{
	size_t got = 0;
	while (got < len) {
		ssize_t n = rrecv(s, (uint8_t *)buf + got, len - got, 0);
		CHECK(n > 0, "rrecv after %zu of %zu bytes: %zd", got, len, n);
		got += n;
	}
}

static void write_full(int s, const void *buf, size_t len)
{
	size_t sent = 0;
	while (sent < len) {
		ssize_t n = rsend(s, (const uint8_t *)buf + sent, len - sent, 0);
		CHECK(n > 0, "rsend after %zu of %zu bytes: %zd", sent, len, n);
		sent += n;
	}
}

static void names(int s, const char *local, const char *peer)
{
	struct sockaddr_in a;
	socklen_t len = sizeof a;
	char ip[INET_ADDRSTRLEN];
	CHECK(rgetsockname(s, (struct sockaddr *)&a, &len) == 0 && a.sin_family == AF_INET, "rgetsockname");
	CHECK(!strcmp(inet_ntop(AF_INET, &a.sin_addr, ip, sizeof ip), local), "local address %s, want %s", ip, local);
	len = sizeof a;
	CHECK(rgetpeername(s, (struct sockaddr *)&a, &len) == 0, "rgetpeername");
	CHECK(!strcmp(inet_ntop(AF_INET, &a.sin_addr, ip, sizeof ip), peer), "peer address %s, want %s", ip, peer);
}

static void options(int s)
{
	int v;
	socklen_t len = sizeof v;
	CHECK(rgetsockopt(s, SOL_SOCKET, SO_ERROR, &v, &len) == 0 && v == 0, "SO_ERROR %d", v);
	v = 1;
	CHECK(rsetsockopt(s, IPPROTO_TCP, TCP_NODELAY, &v, sizeof v) == 0, "TCP_NODELAY");
	len = sizeof v;
	CHECK(rgetsockopt(s, IPPROTO_TCP, TCP_NODELAY, &v, &len) == 0 && v == 1, "TCP_NODELAY read back %d", v);
	len = sizeof v;
	CHECK(rgetsockopt(s, SOL_RDMA, RDMA_INLINE, &v, &len) == 0 && v >= 0, "RDMA_INLINE");
	/* Buffers are fixed once connected: a change is accepted, not applied. */
	len = sizeof v;
	CHECK(rgetsockopt(s, SOL_SOCKET, SO_RCVBUF, &v, &len) == 0 && v == 1 << 18, "SO_RCVBUF %d", v);
	v = 5;
	CHECK(rsetsockopt(s, SOL_RDMA, RDMA_SQSIZE, &v, sizeof v) == -1 && errno == EINVAL, "RDMA_SQSIZE once connected");
	CHECK(rsetsockopt(s, 12345, 1, &v, sizeof v) == -1 && errno == ENOTSUP, "an unknown level");
	CHECK(rfcntl(s, F_GETFL) == O_RDWR, "F_GETFL %d", rfcntl(s, F_GETFL));
	CHECK(rsend(12345, "x", 1, 0) == -1 && errno == EBADF, "rsend on no socket");
}

static void nothing_yet(int s)
{
	char c;
	CHECK(rrecv(s, &c, 1, MSG_DONTWAIT) == -1 && (errno == EAGAIN || errno == EWOULDBLOCK), "a read of nothing");
	struct pollfd p = {.fd = s, .events = POLLIN};
	struct timeval t0, t1;
	gettimeofday(&t0, NULL);
	int n = rpoll(&p, 1, 100);
	gettimeofday(&t1, NULL);
	long ms = (t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_usec - t0.tv_usec) / 1000;
	CHECK(n == 0 && ms >= 90 && ms < 2000, "rpoll of nothing: %d after %ld ms", n, ms);
}

static void send_stream(int s)
{
	/* Odd sizes across several iovecs, so that transfers straddle the
	 * send ring's end and the peer's buffer halves. */
	uint8_t *buf = malloc(TOTAL);
	for (size_t i = 0; i < TOTAL; i++)
		buf[i] = pattern(i);
	size_t off = 0, k = 0;
	while (off < TOTAL) {
		size_t a = 1 + (k * 7919) % 70001, b = 1 + (k * 104729) % 3001;
		if (off + a + b > TOTAL) {
			write_full(s, buf + off, TOTAL - off);
			break;
		}
		struct iovec v[3] = {{buf + off, a}, {buf + off + a, 0}, {buf + off + a, b}};
		ssize_t n = rwritev(s, v, 3);
		CHECK(n > 0, "rwritev");
		off += n;
		k++;
	}
	free(buf);
}

static void recv_stream(int s)
{
	uint8_t *buf = malloc(80000);
	size_t off = 0, k = 0;
	while (off < TOTAL) {
		size_t want = 1 + (k * 65537) % 80000;
		if (want > TOTAL - off)
			want = TOTAL - off;
		ssize_t n;
		if (k % 3 == 0) {
			struct iovec v[2] = {{buf, want / 2}, {buf + want / 2, want - want / 2}};
			n = rreadv(s, v, 2);
		} else {
			n = rrecv(s, buf, want, 0);
		}
		CHECK(n > 0, "read at %zu", off);
		for (ssize_t i = 0; i < n; i++)
			CHECK(buf[i] == pattern(off + i), "byte %zu is %u, want %u", off + i, buf[i], pattern(off + i));
		off += n;
		k++;
	}
	free(buf);
}

static int server(const char *ip, int port, int victim)
{
	int l = rsocket(AF_INET, SOCK_STREAM, 0);
	CHECK(l >= 0, "rsocket");
	int v = 1;
	CHECK(rsetsockopt(l, SOL_SOCKET, SO_REUSEADDR, &v, sizeof v) == 0, "SO_REUSEADDR");
	v = 1; /* the iomap table: one entry, for the client's riowrite target */
	CHECK(rsetsockopt(l, SOL_RDMA, RDMA_IOMAPSIZE, &v, sizeof v) == 0, "RDMA_IOMAPSIZE");
	v = 1 << 17;
	CHECK(rsetsockopt(l, SOL_SOCKET, SO_RCVBUF, &v, sizeof v) == 0, "SO_RCVBUF");
	struct sockaddr_in a = addr_of(ip, port);
	CHECK(rbind(l, (struct sockaddr *)&a, sizeof a) == 0, "rbind");
	CHECK(rlisten(l, 4) == 0, "rlisten");
	printf("listening\n");
	fflush(stdout);
	struct sockaddr_in peer;
	socklen_t plen = sizeof peer;
	int s = raccept(l, (struct sockaddr *)&peer, &plen);
	CHECK(s >= 0, "raccept");
	if (victim) {
		/* The client dies holding the connection: the read ends. */
		char c;
		ssize_t n = rrecv(s, &c, 1, 0);
		CHECK(n <= 0, "read %zd from a dead peer", n);
		printf("peer gone: %zd %s\nok\n", n, n < 0 ? strerror(errno) : "end of stream");
		return 0;
	}
	char peer_ip[INET_ADDRSTRLEN];
	inet_ntop(AF_INET, &peer.sin_addr, peer_ip, sizeof peer_ip);
	names(s, ip, peer_ip);
	options(s);
	nothing_yet(s); /* the client sends nothing until it has our "g" */
	write_full(s, "g", 1);

	char hello[16];
	CHECK(rrecv(s, hello, 5, MSG_PEEK) == 5 && !memcmp(hello, "hello", 5), "MSG_PEEK");
	CHECK(rrecv(s, hello, 16, MSG_WAITALL) == 16 && !memcmp(hello, "hello, rsockets!", 16), "MSG_WAITALL");

	recv_stream(s);

	/* The client writes into this buffer with riowrite. */
	uint8_t *iobuf = calloc(1, IOMAP_LEN);
	CHECK(riomap(s, iobuf, IOMAP_LEN, PROT_WRITE, 0, 0) == 0, "riomap");
	write_full(s, "mapped", 6); /* the map goes ahead of this */
	char done[4];
	read_full(s, done, 4);
	CHECK(!memcmp(done, "done", 4), "iomap done");
	for (size_t i = 0; i < IOMAP_LEN; i++)
		CHECK(iobuf[i] == (uint8_t)(i ^ 0x5a), "iomap byte %zu is %u", i, iobuf[i]);
	CHECK(riounmap(s, iobuf, IOMAP_LEN) == 0, "riounmap");

	/* The client's SHUT_WR: the end of the stream, and still writable. */
	char c;
	CHECK(rrecv(s, &c, 1, 0) == 0, "the end of the stream after SHUT_WR");
	write_full(s, "bye", 3);
	CHECK(rclose(s) == 0, "rclose");
	CHECK(rclose(l) == 0, "rclose listener");
	printf("ok\n");
	return 0;
}

static int client(const char *ip, int port, const char *src, int hold)
{
	int s = rsocket(AF_INET, SOCK_STREAM, 0);
	CHECK(s >= 0, "rsocket");
	if (src) {
		struct sockaddr_in b = addr_of(src, 0);
		CHECK(rbind(s, (struct sockaddr *)&b, sizeof b) == 0, "rbind");
	}
	int v = 1;
	CHECK(rsetsockopt(s, SOL_RDMA, RDMA_IOMAPSIZE, &v, sizeof v) == 0, "RDMA_IOMAPSIZE");
	v = 1 << 17;
	CHECK(rsetsockopt(s, SOL_SOCKET, SO_RCVBUF, &v, sizeof v) == 0, "SO_RCVBUF");
	struct sockaddr_in a = addr_of(ip, port);
	int tries = 0;
	while (rconnect(s, (struct sockaddr *)&a, sizeof a)) {
		CHECK(errno == ECONNREFUSED && ++tries < 100, "rconnect");
		rclose(s); /* the server is not listening yet */
		usleep(100000);
		s = rsocket(AF_INET, SOCK_STREAM, 0);
		CHECK(s >= 0, "rsocket");
		v = 1;
		rsetsockopt(s, SOL_RDMA, RDMA_IOMAPSIZE, &v, sizeof v);
		v = 1 << 17;
		rsetsockopt(s, SOL_SOCKET, SO_RCVBUF, &v, sizeof v);
		if (src) {
			struct sockaddr_in b = addr_of(src, 0);
			CHECK(rbind(s, (struct sockaddr *)&b, sizeof b) == 0, "rbind");
		}
	}
	if (hold) {
		/* Connected: say so (in the file $RSOCKET_READY, if set) and wait. */
		printf("connected\n");
		fflush(stdout);
		const char *ready = getenv("RSOCKET_READY");
		if (ready)
			fclose(fopen(ready, "w"));
		pause();
	}
	if (src)
		names(s, src, ip);
	options(s);
	char g;
	read_full(s, &g, 1);
	nothing_yet(s); /* the server sends nothing until our hello */
	write_full(s, "hello, rsockets!", 16);
	send_stream(s);

	char mapped[6];
	read_full(s, mapped, 6);
	CHECK(!memcmp(mapped, "mapped", 6), "mapped");
	uint8_t *src_buf = malloc(IOMAP_LEN);
	for (size_t i = 0; i < IOMAP_LEN; i++)
		src_buf[i] = (uint8_t)(i ^ 0x5a);
	for (size_t off = 0; off < IOMAP_LEN;) {
		size_t n = riowrite(s, src_buf + off, IOMAP_LEN - off, off, 0);
		CHECK(n != (size_t)-1 && n > 0, "riowrite at %zu", off);
		off += n;
	}
	CHECK(riowrite(s, src_buf, 1, IOMAP_LEN, 0) == (size_t)-1, "riowrite outside the peer's map");
	write_full(s, "done", 4);

	CHECK(rshutdown(s, SHUT_WR) == 0, "rshutdown");
	CHECK(rsend(s, "x", 1, 0) == -1 && errno == EPIPE, "a write after SHUT_WR");
	char bye[3], c;
	read_full(s, bye, 3);
	CHECK(!memcmp(bye, "bye", 3), "bye");
	CHECK(rrecv(s, &c, 1, 0) == 0, "the end of the stream after the server's close");
	CHECK(rclose(s) == 0, "rclose");
	printf("ok\n");
	return 0;
}

/* The rsocket connection data, as rdma-core lays it out. */
struct conn_data {
	uint8_t version, flags;
	uint16_t credits;
	uint8_t reserved[3], iomap_size;
	struct {
		uint64_t addr;
		uint32_t key, length;
	} target_sgl, data_buf;
};

/* make_ep makes an RC id with a QP, routed to ip:port, not connected. */
static struct rdma_cm_id *make_ep(const char *ip, const char *port)
{
	struct rdma_addrinfo hints = {.ai_port_space = RDMA_PS_TCP}, *res;
	CHECK(rdma_getaddrinfo(ip, port, &hints, &res) == 0, "rdma_getaddrinfo");
	struct ibv_qp_init_attr qa = {.cap = {.max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1},
				      .sq_sig_all = 1};
	struct rdma_cm_id *id;
	CHECK(rdma_create_ep(&id, res, NULL, &qa) == 0, "rdma_create_ep");
	rdma_freeaddrinfo(res);
	return id;
}

static int rdma_connect_with(struct rdma_cm_id *id, const void *p, uint8_t len)
{
	struct rdma_conn_param cp = {.private_data = p, .private_data_len = len, .retry_count = 7, .rnr_retry_count = 7,
				     .responder_resources = 1, .initiator_depth = 1};
	return rdma_connect(id, &cp);
}

static int rogue(const char *ip, int port)
{
	char ps[16];
	snprintf(ps, sizeof ps, "%d", port);
	/* Not an rsocket's connection data: refused (the server listens:
	 * $RSOCKET_READY says so). */
	struct conn_data c = {.version = 2, .credits = htons(16)};
	struct rdma_cm_id *id = make_ep(ip, ps);
	CHECK(rdma_connect_with(id, &c, sizeof c) == -1 && errno == ECONNREFUSED, "connection data of version 2");
	rdma_destroy_ep(id);
	id = make_ep(ip, ps);
	CHECK(rdma_connect_with(id, "rs", 2) == -1 && errno == ECONNREFUSED, "2 bytes of connection data");
	rdma_destroy_ep(id);

	/* Well-formed, then a DATA message of 512 MiB - 1 bytes: more than
	 * any buffer, and the server must not believe it. */
	static uint8_t sgl[64], data[65536];
	id = make_ep(ip, ps);
	struct ibv_mr *smr = rdma_reg_write(id, sgl, sizeof sgl), *dmr = rdma_reg_write(id, data, sizeof data);
	CHECK(smr && dmr, "ibv_reg_mr");
	c = (struct conn_data){.version = 1, .credits = htons(16)};
	c.target_sgl.addr = htobe64((uintptr_t)sgl);
	c.target_sgl.key = htonl(smr->rkey);
	c.target_sgl.length = htonl(2);
	c.data_buf.addr = htobe64((uintptr_t)data);
	c.data_buf.key = htonl(dmr->rkey);
	c.data_buf.length = htonl(sizeof data / 2);
	CHECK(rdma_connect_with(id, &c, sizeof c) == 0, "a well-formed connection");
	struct ibv_send_wr wr = {.wr_id = 1, .opcode = IBV_WR_RDMA_WRITE_WITH_IMM, .imm_data = htonl(0x1FFFFFFF)}, *bad;
	CHECK(ibv_post_send(id->qp, &wr, &bad) == 0, "post the forged DATA");
	struct ibv_wc wc;
	int n;
	while ((n = ibv_poll_cq(id->send_cq, 1, &wc)) == 0)
		;
	CHECK(n == 1 && wc.status == IBV_WC_SUCCESS, "the forged DATA's completion: %s", ibv_wc_status_str(wc.status));
	printf("ok\n");
	fflush(stdout);
	sleep(1); /* the server reads and ends before this disconnects */
	rdma_disconnect(id);
	return 0;
}

static int strict(const char *ip, int port)
{
	int l = rsocket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = addr_of(ip, port);
	CHECK(l >= 0 && rbind(l, (struct sockaddr *)&a, sizeof a) == 0 && rlisten(l, 4) == 0, "listen");
	const char *ready = getenv("RSOCKET_READY");
	if (ready)
		fclose(fopen(ready, "w"));
	/* The two requests with bad connection data are refused inside. */
	int s = raccept(l, NULL, NULL);
	CHECK(s >= 0, "raccept");
	char buf[64];
	ssize_t r = rrecv(s, buf, sizeof buf, 0);
	CHECK(r == -1 && errno == EPROTO, "a read after a forged DATA: %zd", r);
	printf("ok\n");
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 4) {
		fprintf(stderr, "usage: %s server|client|hold|victim ADDR PORT [SRC]\n", argv[0]);
		return 2;
	}
	int port = atoi(argv[3]);
	if (!strcmp(argv[1], "server"))
		return server(argv[2], port, 0);
	if (!strcmp(argv[1], "victim"))
		return server(argv[2], port, 1);
	if (!strcmp(argv[1], "client"))
		return client(argv[2], port, argc > 4 ? argv[4] : NULL, 0);
	if (!strcmp(argv[1], "strict"))
		return strict(argv[2], port);
	if (!strcmp(argv[1], "rogue"))
		return rogue(argv[2], port);
	if (!strcmp(argv[1], "hold"))
		return client(argv[2], port, argc > 4 ? argv[4] : NULL, 1);
	return 2;
}
