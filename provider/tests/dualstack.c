/*
 * rdma_set_option as a dual-stack server and its clients use it (issue
 * 26): every option takes effect as on Linux or is refused with the
 * errno Linux gives. Run as
 *   dualstack V4SRV V4CLI V6 PORT
 * with NICs on V4SRV, V4CLI (IPv4) and V6 (IPv6; "-" if there is none:
 * the IPv6 connection is left out), ports PORT to PORT+9 free. In one
 * process, on separate event channels for the servers and the clients:
 *   - AFONLY: [::]:P with AFONLY beside 0.0.0.0:P (both listen); an IPv4
 *     client reaches the IPv4 listener, an IPv6 one the IPv6 listener;
 *     an IPv4 client of a port only [::] with AFONLY listens on is
 *     rejected (REJ 28, as the kernel's CM refuses a request no listener
 *     takes). Without AFONLY (net.ipv6.bindv6only 0) [::]:P covers IPv4:
 *     0.0.0.0:P may not bind (EADDRNOTAVAIL, as the kernel's
 *     cma_check_port answers when a wildcard is involved) and an IPv4
 *     client reaches [::]:P with IPv4 addresses. AFONLY is taken by a
 *     bound id (and then lets 0.0.0.0 bind), refused once it listens or
 *     has resolved (EINVAL).
 *   - REUSEADDR: ids that all have it share a port; one without is
 *     refused (EADDRINUSE); a listener may not share it (EADDRINUSE until
 *     the other goes), and has it no more; it cannot be turned off once
 *     bound, nor on once listening (EINVAL).
 *   - TOS and ACK_TIMEOUT set before the route: both QPs get the traffic
 *     class, the client's QP the timeout and the server's the REQ's local
 *     ACK timeout (the kernel CM's cm_ack_timeout of the packet lifetime).
 *   - RDMA_OPTION_IB_PATH: the route is the record's (MTU, traffic class,
 *     hop limit, packet lifetime reach both QPs); refused with EINVAL for
 *     a length that is no multiple of a record, no primary path, an id
 *     with no address resolved or a route already.
 *   - Lengths and levels: EINVAL for a wrong length, EFAULT for no
 *     value, ENOSYS for an option or level the kernel does not know,
 *     EINVAL for ACK_TIMEOUT on a UD id.
 * Prints "ok" at the end, or what failed and exits 1.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/sa.h>
#include <rdma/rdma_cma.h>

#define CHECK(cond, ...)                                                          \
	do {                                                                      \
		if (!(cond)) {                                                    \
			fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);      \
			fprintf(stderr, __VA_ARGS__);                             \
			fprintf(stderr, " (errno %d %s)\n", errno, strerror(errno)); \
			exit(1);                                                  \
		}                                                                 \
	} while (0)

/* FAILS checks that call fails with errno want. */
#define FAILS(call, want, what)                                                           \
	do {                                                                              \
		errno = 0;                                                                \
		int r_ = (call);                                                          \
		CHECK(r_ != 0 && errno == (want), "%s: %d, want errno %d (%s)", what, r_, \
		      want, strerror(want));                                              \
	} while (0)

static struct rdma_event_channel *srv_ch, *cli_ch;
static const char *v4srv, *v4cli, *v6;
static int port0;

static struct sockaddr_storage addr(const char *ip, int port)
{
	struct sockaddr_storage ss;
	memset(&ss, 0, sizeof ss);
	struct sockaddr_in *in = (struct sockaddr_in *)&ss;
	struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;
	if (inet_pton(AF_INET, ip, &in->sin_addr) == 1) {
		in->sin_family = AF_INET;
		in->sin_port = htons(port);
	} else if (inet_pton(AF_INET6, ip, &in6->sin6_addr) == 1) {
		in6->sin6_family = AF_INET6;
		in6->sin6_port = htons(port);
	} else {
		CHECK(0, "address %s", ip);
	}
	return ss;
}
#define SA(ss) ((struct sockaddr *)&(ss))

/* next waits up to 10 s for the channel's next event (the channel is
 * non-blocking, so that a missing event fails the test, not hangs it). */
static struct rdma_cm_event *next(struct rdma_event_channel *ch)
{
	struct timespec t0, t;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		struct rdma_cm_event *ev;
		if (!rdma_get_cm_event(ch, &ev))
			return ev;
		CHECK(errno == EAGAIN, "rdma_get_cm_event");
		clock_gettime(CLOCK_MONOTONIC, &t);
		CHECK(t.tv_sec - t0.tv_sec < 10, "no event in 10 s");
		struct pollfd p = {.fd = ch->fd, .events = POLLIN};
		poll(&p, 1, 100);
	}
}

/* expect waits for an event of type want (of id, if given) and acks it;
 * *copy gets it first if given. */
static void expect(struct rdma_event_channel *ch, enum rdma_cm_event_type want, struct rdma_cm_id *id,
		   struct rdma_cm_event *copy)
{
	struct rdma_cm_event *ev = next(ch);
	CHECK(ev->event == want && (!id || ev->id == id), "event %s (status %d), want %s", rdma_event_str(ev->event),
	      ev->status, rdma_event_str(want));
	if (copy)
		*copy = *ev;
	rdma_ack_cm_event(ev);
}

static struct rdma_cm_id *new_id(struct rdma_event_channel *ch, enum rdma_port_space ps)
{
	struct rdma_cm_id *id;
	CHECK(!rdma_create_id(ch, &id, NULL, ps), "rdma_create_id");
	return id;
}

static int set_int(struct rdma_cm_id *id, int opt, int v)
{
	return rdma_set_option(id, RDMA_OPTION_ID, opt, &v, sizeof v);
}

static int set_u8(struct rdma_cm_id *id, int opt, uint8_t v)
{
	return rdma_set_option(id, RDMA_OPTION_ID, opt, &v, sizeof v);
}

/* listener binds a new id to ip:port (AFONLY afonly if >= 0) and listens. */
static struct rdma_cm_id *listener(const char *ip, int port, int afonly)
{
	struct rdma_cm_id *id = new_id(srv_ch, RDMA_PS_TCP);
	struct sockaddr_storage a = addr(ip, port);
	if (afonly >= 0)
		CHECK(!set_int(id, RDMA_OPTION_ID_AFONLY, afonly), "AFONLY %d before bind", afonly);
	CHECK(!rdma_bind_addr(id, SA(a)), "bind %s:%d", ip, port);
	CHECK(!rdma_listen(id, 4), "listen %s:%d", ip, port);
	return id;
}

static void qp(struct rdma_cm_id *id)
{
	struct ibv_qp_init_attr a = {.cap = {.max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1},
				     .qp_type = IBV_QPT_RC};
	CHECK(!rdma_create_qp(id, NULL, &a), "rdma_create_qp");
}

/* resolved is a client id of src (NULL: the route's choice) whose
 * address to dst:port is resolved, its route not yet. */
static struct rdma_cm_id *resolved(const char *src, const char *dst, int port)
{
	struct rdma_cm_id *c = new_id(cli_ch, RDMA_PS_TCP);
	struct sockaddr_storage s, d = addr(dst, port);
	if (src)
		s = addr(src, 0);
	CHECK(!rdma_resolve_addr(c, src ? SA(s) : NULL, SA(d), 2000), "resolve %s", dst);
	expect(cli_ch, RDMA_CM_EVENT_ADDR_RESOLVED, c, NULL);
	return c;
}

/* connect_routed connects the routed client c; the server accepts on the
 * listener it reaches, which is returned (with the server's new id). */
static struct rdma_cm_id *connect_routed(struct rdma_cm_id *c, struct rdma_cm_id **conn)
{
	qp(c);
	struct rdma_conn_param p = {.responder_resources = 1, .initiator_depth = 1, .retry_count = 7, .rnr_retry_count = 7};
	CHECK(!rdma_connect(c, &p), "rdma_connect");
	struct rdma_cm_event ev;
	expect(srv_ch, RDMA_CM_EVENT_CONNECT_REQUEST, NULL, &ev);
	*conn = ev.id;
	qp(ev.id);
	CHECK(!rdma_accept(ev.id, &p), "rdma_accept");
	expect(cli_ch, RDMA_CM_EVENT_ESTABLISHED, c, NULL);
	expect(srv_ch, RDMA_CM_EVENT_ESTABLISHED, ev.id, NULL);
	return ev.listen_id;
}

static struct rdma_cm_id *connect_to(const char *src, const char *dst, int port, struct rdma_cm_id **cli,
				     struct rdma_cm_id **conn)
{
	struct rdma_cm_id *c = resolved(src, dst, port);
	CHECK(!rdma_resolve_route(c, 2000), "resolve_route");
	expect(cli_ch, RDMA_CM_EVENT_ROUTE_RESOLVED, c, NULL);
	*cli = c;
	return connect_routed(c, conn);
}

static void teardown(struct rdma_cm_id *cli, struct rdma_cm_id *conn)
{
	rdma_destroy_qp(cli);
	rdma_destroy_id(cli);
	rdma_destroy_qp(conn);
	rdma_destroy_id(conn);
	/* What the two left on the channels (DISCONNECTED) is theirs. */
	struct rdma_cm_event *ev;
	while (!rdma_get_cm_event(cli_ch, &ev))
		rdma_ack_cm_event(ev);
	while (!rdma_get_cm_event(srv_ch, &ev))
		rdma_ack_cm_event(ev);
}

static void afonly(void)
{
	int p = port0;
	/* The dual-stack server: [::]:P serving IPv6 only, 0.0.0.0:P. */
	struct rdma_cm_id *l6 = listener("::", p, 1), *l4 = listener("0.0.0.0", p, -1);
	struct rdma_cm_id *cli, *conn;
	CHECK(connect_to(v4cli, v4srv, p, &cli, &conn) == l4, "an IPv4 client reached the IPv6 listener");
	CHECK(conn->route.addr.src_addr.sa_family == AF_INET, "the IPv4 connection's address family");
	teardown(cli, conn);
	if (strcmp(v6, "-")) {
		CHECK(connect_to(NULL, v6, p, &cli, &conn) == l6, "an IPv6 client reached the IPv4 listener");
		CHECK(conn->route.addr.src_addr.sa_family == AF_INET6, "the IPv6 connection's address family");
		teardown(cli, conn);
	}
	rdma_destroy_id(l4);

	/* Only [::] with AFONLY listens: an IPv4 request is for no
	 * listener, and is rejected as the kernel's CM rejects it. */
	cli = resolved(v4cli, v4srv, p);
	CHECK(!rdma_resolve_route(cli, 2000), "resolve_route");
	expect(cli_ch, RDMA_CM_EVENT_ROUTE_RESOLVED, cli, NULL);
	qp(cli);
	struct rdma_conn_param cp = {.responder_resources = 1, .initiator_depth = 1, .retry_count = 7, .rnr_retry_count = 7};
	CHECK(!rdma_connect(cli, &cp), "rdma_connect");
	struct rdma_cm_event ev;
	expect(cli_ch, RDMA_CM_EVENT_REJECTED, cli, &ev);
	CHECK(ev.status == 28, "REJ reason %d, want 28 (consumer defined)", ev.status);
	rdma_destroy_qp(cli);
	rdma_destroy_id(cli);
	/* AFONLY once listening: the kernel refuses it. */
	FAILS(set_int(l6, RDMA_OPTION_ID_AFONLY, 0), EINVAL, "AFONLY on a listener");
	rdma_destroy_id(l6);

	/* Without AFONLY, [::]:P serves IPv4 too (if the host's default is
	 * the kernel's: net.ipv6.bindv6only 0). */
	FILE *f = fopen("/proc/sys/net/ipv6/bindv6only", "r");
	int v6only = 0;
	if (f) {
		if (fscanf(f, "%d", &v6only) != 1)
			v6only = 0;
		fclose(f);
	}
	p = port0 + 1;
	struct rdma_cm_id *any6 = listener("::", p, v6only ? 0 : -1);
	struct rdma_cm_id *id4 = new_id(srv_ch, RDMA_PS_TCP);
	struct sockaddr_storage a4 = addr("0.0.0.0", p);
	FAILS(rdma_bind_addr(id4, SA(a4)), EADDRNOTAVAIL, "0.0.0.0 on the port of [::] without AFONLY");
	struct sockaddr_storage s4 = addr(v4srv, p);
	FAILS(rdma_bind_addr(id4, SA(s4)), EADDRNOTAVAIL, "an IPv4 address on the port of [::] without AFONLY");
	/* A bind that failed leaves the id unbound: it binds elsewhere. */
	a4 = addr("0.0.0.0", port0 + 2);
	CHECK(!rdma_bind_addr(id4, SA(a4)), "bind after a failed bind");
	rdma_destroy_id(id4);
	CHECK(connect_to(v4cli, v4srv, p, &cli, &conn) == any6, "an IPv4 client of [::] without AFONLY");
	CHECK(conn->route.addr.src_addr.sa_family == AF_INET && cli->route.addr.dst_addr.sa_family == AF_INET,
	      "an IPv6 listener's IPv4 connection has IPv4 addresses");
	teardown(cli, conn);
	rdma_destroy_id(any6);

	/* AFONLY set on a bound id takes effect (the kernel takes it until
	 * the id listens): 0.0.0.0 may then share the port. */
	p = port0 + 3;
	struct rdma_cm_id *b6 = new_id(srv_ch, RDMA_PS_TCP);
	struct sockaddr_storage w6 = addr("::", p);
	if (v6only)
		CHECK(!set_int(b6, RDMA_OPTION_ID_AFONLY, 0), "AFONLY 0");
	CHECK(!rdma_bind_addr(b6, SA(w6)), "bind [::]");
	CHECK(!set_int(b6, RDMA_OPTION_ID_AFONLY, 1), "AFONLY after bind (the kernel takes it in ADDR_BOUND)");
	struct rdma_cm_id *b4 = listener("0.0.0.0", p, -1);
	CHECK(!rdma_listen(b6, 4), "listen [::] with AFONLY");
	CHECK(connect_to(v4cli, v4srv, p, &cli, &conn) == b4, "an IPv4 client of a port [::] with AFONLY shares");
	FAILS(set_int(cli, RDMA_OPTION_ID_AFONLY, 1), EINVAL, "AFONLY on a connected id");
	teardown(cli, conn);
	rdma_destroy_id(b4);
	rdma_destroy_id(b6);
	/* ... and on an id whose address is resolved. */
	cli = resolved(v4cli, v4srv, p);
	FAILS(set_int(cli, RDMA_OPTION_ID_AFONLY, 1), EINVAL, "AFONLY on a resolved id");
	rdma_destroy_id(cli);
}

static void reuseaddr(void)
{
	int p = port0 + 4;
	struct sockaddr_storage a = addr(v4srv, p), w = addr("0.0.0.0", p + 1);
	struct rdma_cm_id *r1 = new_id(srv_ch, RDMA_PS_TCP), *r2 = new_id(srv_ch, RDMA_PS_TCP);
	struct rdma_cm_id *r3 = new_id(srv_ch, RDMA_PS_TCP), *r4 = new_id(srv_ch, RDMA_PS_TCP);
	CHECK(!set_int(r1, RDMA_OPTION_ID_REUSEADDR, 1) && !set_int(r2, RDMA_OPTION_ID_REUSEADDR, 1), "REUSEADDR");
	CHECK(!rdma_bind_addr(r1, SA(a)) && !rdma_bind_addr(r2, SA(a)), "two ids with REUSEADDR on one port");
	FAILS(rdma_bind_addr(r3, SA(a)), EADDRINUSE, "an id without REUSEADDR on their port");
	FAILS(set_int(r1, RDMA_OPTION_ID_REUSEADDR, 0), EINVAL, "REUSEADDR off once bound");
	/* A listener may not share its port. */
	FAILS(rdma_listen(r1, 4), EADDRINUSE, "listen on a port another id shares");
	rdma_destroy_id(r2);
	CHECK(!rdma_listen(r1, 4), "listen once the other is gone");
	FAILS(set_int(r1, RDMA_OPTION_ID_REUSEADDR, 1), EINVAL, "REUSEADDR on a listener");
	CHECK(!set_int(r4, RDMA_OPTION_ID_REUSEADDR, 1), "REUSEADDR");
	FAILS(rdma_bind_addr(r4, SA(a)), EADDRINUSE, "REUSEADDR on a listener's port");
	/* Wildcards with REUSEADDR share too; without, the second is refused. */
	CHECK(!rdma_bind_addr(r4, SA(w)), "wildcard with REUSEADDR");
	CHECK(!set_int(r3, RDMA_OPTION_ID_REUSEADDR, 1) && !rdma_bind_addr(r3, SA(w)), "two wildcards with REUSEADDR");
	struct rdma_cm_id *r5 = new_id(srv_ch, RDMA_PS_TCP);
	FAILS(rdma_bind_addr(r5, SA(w)), EADDRNOTAVAIL, "a wildcard without REUSEADDR on their port");
	FAILS(rdma_listen(r3, 4), EADDRNOTAVAIL, "a wildcard listener on a port another shares");
	rdma_destroy_id(r4);
	CHECK(!rdma_listen(r3, 4), "the wildcard listens once the other is gone");
	rdma_destroy_id(r1);
	rdma_destroy_id(r3);
	rdma_destroy_id(r5);
}

static void query(struct rdma_cm_id *id, struct ibv_qp_attr *a)
{
	struct ibv_qp_init_attr ia;
	CHECK(!ibv_query_qp(id->qp, a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_TIMEOUT, &ia), "ibv_query_qp");
}

/* cm_ack_timeout is the kernel CM's: a path's local ACK timeout. */
static int cm_ack_timeout(int ack_delay, int life)
{
	int t = life + 1;
	if (t >= ack_delay)
		t += ack_delay >= t - 1;
	else
		t = ack_delay + (t >= ack_delay - 1);
	return t < 31 ? t : 31;
}

static void tos_timeout(void)
{
	int p = port0 + 6;
	struct rdma_cm_id *l = listener(v4srv, p, -1);
	struct rdma_cm_id *c = resolved(v4cli, v4srv, p), *conn;
	CHECK(!set_u8(c, RDMA_OPTION_ID_TOS, 0x48), "TOS");
	CHECK(!set_u8(c, RDMA_OPTION_ID_ACK_TIMEOUT, 12), "ACK_TIMEOUT");
	CHECK(!rdma_resolve_route(c, 2000), "resolve_route");
	expect(cli_ch, RDMA_CM_EVENT_ROUTE_RESOLVED, c, NULL);
	CHECK(c->route.path_rec && c->route.path_rec->traffic_class == 0x48 && c->route.path_rec->packet_life_time == 11,
	      "the route's traffic class and packet lifetime");
	connect_routed(c, &conn);
	struct ibv_qp_attr a, b;
	query(c, &a);
	query(conn, &b);
	CHECK(a.ah_attr.grh.traffic_class == 0x48 && b.ah_attr.grh.traffic_class == 0x48,
	      "traffic class %#x and %#x, want the TOS 0x48 on both", a.ah_attr.grh.traffic_class,
	      b.ah_attr.grh.traffic_class);
	CHECK(a.timeout == 12, "the client's timeout %d, want 12", a.timeout);
	CHECK(b.timeout == cm_ack_timeout(15, 11), "the server's timeout %d, want the REQ's %d", b.timeout,
	      cm_ack_timeout(15, 11));
	teardown(c, conn);

	/* A TOS set after the route is the next route's (the kernel's
	 * resolved route keeps the one it had). */
	c = resolved(v4cli, v4srv, p);
	CHECK(!rdma_resolve_route(c, 2000), "resolve_route");
	expect(cli_ch, RDMA_CM_EVENT_ROUTE_RESOLVED, c, NULL);
	CHECK(!set_u8(c, RDMA_OPTION_ID_TOS, 0x20), "TOS after the route");
	connect_routed(c, &conn);
	query(c, &a);
	CHECK(a.ah_attr.grh.traffic_class == 0, "traffic class %#x after a TOS set late", a.ah_attr.grh.traffic_class);
	teardown(c, conn);
	rdma_destroy_id(l);
}

static void ib_path(void)
{
	int p = port0 + 7;
	struct rdma_cm_id *l = listener(v4srv, p, -1);
	struct ibv_path_data d[2];
	memset(d, 0, sizeof d);
	d[0].flags = IBV_PATH_FLAG_GMP | IBV_PATH_FLAG_ALTERNATE | IBV_PATH_FLAG_BIDIRECTIONAL;
	d[1].flags = IBV_PATH_FLAG_GMP | IBV_PATH_FLAG_PRIMARY | IBV_PATH_FLAG_BIDIRECTIONAL;
	struct rdma_cm_id *c = new_id(cli_ch, RDMA_PS_TCP), *conn;
	FAILS(rdma_set_option(c, RDMA_OPTION_IB, RDMA_OPTION_IB_PATH, d, sizeof d), EINVAL, "a path on an id with no address");
	rdma_destroy_id(c);
	c = resolved(v4cli, v4srv, p);
	struct ibv_path_record *r = &d[1].path;
	memcpy(r->dgid.raw, c->route.addr.addr.ibaddr.dgid.raw, 16);
	memcpy(r->sgid.raw, c->route.addr.addr.ibaddr.sgid.raw, 16);
	r->flowlabel_hoplimit = htobe32(0x1234u << 8 | 9);
	r->tclass = 0x28;
	r->reversible_numpath = 0x81;
	r->pkey = htobe16(0xffff);
	r->mtu = 2 << 6 | IBV_MTU_512;
	r->packetlifetime = 2 << 6 | 10;
	FAILS(rdma_set_option(c, RDMA_OPTION_IB, RDMA_OPTION_IB_PATH, d, sizeof d - 1), EINVAL, "a part of a record");
	FAILS(rdma_set_option(c, RDMA_OPTION_IB, RDMA_OPTION_IB_PATH, d, sizeof d[0]), EINVAL, "no primary path");
	CHECK(!rdma_set_option(c, RDMA_OPTION_IB, RDMA_OPTION_IB_PATH, d, sizeof d), "RDMA_OPTION_IB_PATH");
	expect(cli_ch, RDMA_CM_EVENT_ROUTE_RESOLVED, c, NULL);
	CHECK(c->route.num_paths == 1 && c->route.path_rec->mtu == IBV_MTU_512 && c->route.path_rec->hop_limit == 9,
	      "the route is the record");
	FAILS(rdma_set_option(c, RDMA_OPTION_IB, RDMA_OPTION_IB_PATH, d, sizeof d), EINVAL, "a path once routed");
	FAILS(rdma_resolve_route(c, 2000), EINVAL, "resolve_route once routed");
	connect_routed(c, &conn);
	struct ibv_qp_attr a, b;
	query(c, &a);
	query(conn, &b);
	CHECK(a.path_mtu == IBV_MTU_512 && b.path_mtu == IBV_MTU_512, "path MTU %d and %d, want the record's", a.path_mtu,
	      b.path_mtu);
	CHECK(a.ah_attr.grh.traffic_class == 0x28 && b.ah_attr.grh.traffic_class == 0x28, "traffic class %#x and %#x",
	      a.ah_attr.grh.traffic_class, b.ah_attr.grh.traffic_class);
	CHECK(a.ah_attr.grh.hop_limit == 9 && b.ah_attr.grh.hop_limit == 9, "hop limit %d and %d",
	      a.ah_attr.grh.hop_limit, b.ah_attr.grh.hop_limit);
	CHECK(a.ah_attr.grh.flow_label == 0x1234 && b.ah_attr.grh.flow_label == 0x1234, "flow label %#x and %#x",
	      a.ah_attr.grh.flow_label, b.ah_attr.grh.flow_label);
	CHECK(a.timeout == cm_ack_timeout(15, 10) && b.timeout == cm_ack_timeout(15, 10), "timeouts %d and %d, want %d",
	      a.timeout, b.timeout, cm_ack_timeout(15, 10));
	teardown(c, conn);
	rdma_destroy_id(l);
}

static void lengths(void)
{
	struct rdma_cm_id *id = new_id(srv_ch, RDMA_PS_TCP), *ud = new_id(srv_ch, RDMA_PS_UDP);
	int one = 1;
	uint8_t b = 1;
	FAILS(rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_AFONLY, &b, 1), EINVAL, "AFONLY of 1 byte");
	FAILS(rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_REUSEADDR, &b, 1), EINVAL, "REUSEADDR of 1 byte");
	FAILS(rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, &one, sizeof one), EINVAL, "TOS of an int");
	FAILS(rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT, &one, sizeof one), EINVAL, "ACK_TIMEOUT of an int");
	FAILS(rdma_set_option(ud, RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT, &b, 1), EINVAL, "ACK_TIMEOUT of a UD id");
	FAILS(rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_AFONLY, NULL, sizeof one), EFAULT, "no value");
	FAILS(rdma_set_option(id, RDMA_OPTION_ID, 99, &one, sizeof one), ENOSYS, "an option the kernel does not know");
	FAILS(rdma_set_option(id, 7, RDMA_OPTION_ID_AFONLY, &one, sizeof one), ENOSYS, "a level the kernel does not know");
	FAILS(rdma_set_option(id, RDMA_OPTION_IB, 9, &one, sizeof one), ENOSYS, "an IB option the kernel does not know");
	b = 40; /* any value: the QP's modify judges it, as the kernel */
	CHECK(!rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT, &b, 1), "ACK_TIMEOUT 40");
	rdma_destroy_id(id);
	rdma_destroy_id(ud);
}

int main(int argc, char **argv)
{
	if (argc != 5) {
		fprintf(stderr, "usage: dualstack V4SRV V4CLI V6|- PORT\n");
		return 2;
	}
	setvbuf(stdout, NULL, _IONBF, 0); /* progress in order with a failure's message */
	v4srv = argv[1], v4cli = argv[2], v6 = argv[3], port0 = atoi(argv[4]);
	srv_ch = rdma_create_event_channel();
	cli_ch = rdma_create_event_channel();
	CHECK(srv_ch && cli_ch, "rdma_create_event_channel");
	fcntl(srv_ch->fd, F_SETFL, fcntl(srv_ch->fd, F_GETFL) | O_NONBLOCK);
	fcntl(cli_ch->fd, F_SETFL, fcntl(cli_ch->fd, F_GETFL) | O_NONBLOCK);
	lengths();
	printf("lengths ok\n");
	afonly();
	printf("afonly ok\n");
	reuseaddr();
	printf("reuseaddr ok\n");
	tos_timeout();
	printf("tos and ack timeout ok\n");
	ib_path();
	printf("ib path ok\n");
	rdma_destroy_event_channel(srv_ch);
	rdma_destroy_event_channel(cli_ch);
	printf("ok\n");
	return 0;
}
