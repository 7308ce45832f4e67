/*
 * rnic's librdmacm: the RDMA CM library that programs load instead of
 * rdma-core's when they run on rnic (rnic exec). Linux's librdmacm talks
 * to the kernel's rdma_cm through /dev/infiniband/rdma_cm; this one talks
 * to the connection manager of the NIC processes (package cm) through
 * their CM sockets (internal/hostif/cm.go), and does what librdmacm does
 * itself: it readies the program's QPs with the CM's attributes (ucma's
 * INIT_QP_ATTR), reports ESTABLISHED after the RTU it sends, finds the
 * NIC that serves an address, and binds a wildcard address on every NIC
 * (a part of the id on each holds its port, so that the NICs check a
 * bind as the kernel checks it on the host) and listens through them (as
 * the kernel's cma_listen_on_all). rdma_set_option's options take effect
 * on the NICs (cm/ports.go, and the route for TOS, ACK_TIMEOUT and
 * IB_PATH) or are refused with the kernel's errno. It is compiled against
 * the system's <rdma/rdma_cma.h>, so that the structures programs see
 * match, and exports the symbol versions programs import (librdmacm.map).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cma.h"

/* --- the NICs (their descriptions in the run directory) --- */

static struct cma_nic nics[MAX_NICS];
static int nnics;
static pthread_mutex_t nics_lock = PTHREAD_MUTEX_INITIALIZER;

/* json_str copies the string value of "key" in a one-line JSON object. */
static int json_str(const char *j, const char *key, char *out, size_t n)
{
	char pat[64];
	snprintf(pat, sizeof pat, "\"%s\":\"", key);
	const char *p = strstr(j, pat);
	if (!p)
		return -1;
	p += strlen(pat);
	const char *e = strchr(p, '"');
	if (!e || (size_t)(e - p) >= n)
		return -1;
	memcpy(out, p, e - p);
	out[e - p] = 0;
	return 0;
}

static int parse_ip(const char *s, struct sockaddr_storage *ss)
{
	memset(ss, 0, sizeof *ss);
	struct sockaddr_in *in = (struct sockaddr_in *)ss;
	struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ss;
	if (inet_pton(AF_INET, s, &in->sin_addr) == 1) {
		in->sin_family = AF_INET;
		return 0;
	}
	if (inet_pton(AF_INET6, s, &in6->sin6_addr) == 1) {
		in6->sin6_family = AF_INET6;
		return 0;
	}
	return -1;
}

/* scan_nics reads the run directory's NIC descriptions (again: NICs come
 * and go). NICs already known keep their slot and connections. */
static void scan_nics(void)
{
	char dir[PATH_MAX];
	hostif_run_dir(dir, sizeof dir);
	DIR *d = opendir(dir);
	if (!d)
		return;
	pthread_mutex_lock(&nics_lock);
	struct dirent *e;
	while ((e = readdir(d))) {
		size_t len = strlen(e->d_name);
		if (len <= 5 || strcmp(e->d_name + len - 5, ".json"))
			continue;
		char path[PATH_MAX], buf[2048];
		if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, e->d_name) >= sizeof path)
			continue;
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		ssize_t n = read(fd, buf, sizeof buf - 1);
		close(fd);
		if (n <= 0)
			continue;
		buf[n] = 0;
		char name[64], addr[INET6_ADDRSTRLEN + 1], sock[PATH_MAX];
		if (json_str(buf, "name", name, sizeof name) || json_str(buf, "addr", addr, sizeof addr) ||
		    json_str(buf, "cm_socket", sock, sizeof sock))
			continue;
		int known = 0;
		for (int i = 0; i < nnics; i++)
			if (!strcmp(nics[i].name, name) && !strcmp(nics[i].cm_socket, sock))
				known = 1;
		if (known || nnics == MAX_NICS)
			continue;
		struct cma_nic *nic = &nics[nnics];
		memset(nic, 0, sizeof *nic);
		if (parse_ip(addr, &nic->addr))
			continue;
		snprintf(nic->name, sizeof nic->name, "%s", name);
		snprintf(nic->cm_socket, sizeof nic->cm_socket, "%s", sock);
		nic->cmd = -1;
		pthread_mutex_init(&nic->lock, NULL);
		nnics++;
	}
	closedir(d);
	pthread_mutex_unlock(&nics_lock);
}

/* same_ip compares the addresses (not the ports); an IPv4-mapped IPv6
 * address equals its IPv4 address. */
static int ip_of(const struct sockaddr *sa, uint8_t out[16])
{
	memset(out, 0, 16);
	if (sa->sa_family == AF_INET) {
		out[10] = out[11] = 0xff;
		memcpy(out + 12, &((const struct sockaddr_in *)sa)->sin_addr, 4);
		return 4;
	}
	if (sa->sa_family == AF_INET6) {
		memcpy(out, &((const struct sockaddr_in6 *)sa)->sin6_addr, 16);
		static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
		return memcmp(out, mapped, 12) ? 6 : 4;
	}
	return 0;
}

static int same_ip(const struct sockaddr *a, const struct sockaddr *b)
{
	uint8_t x[16], y[16];
	return ip_of(a, x) && ip_of(b, y) && !memcmp(x, y, 16);
}

static int is_any(const struct sockaddr *sa)
{
	uint8_t x[16];
	if (!ip_of(sa, x))
		return 0;
	static const uint8_t zero[16], any4[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
	return !memcmp(x, zero, 16) || !memcmp(x, any4, 16);
}

/* is_loopback: 127.0.0.0/8 (also IPv4-mapped) or ::1. */
static int is_loopback(const struct sockaddr *sa)
{
	uint8_t x[16];
	if (!ip_of(sa, x))
		return 0;
	static const uint8_t one6[16] = {[15] = 1}, mapped[12] = {[10] = 0xff, [11] = 0xff};
	return !memcmp(x, one6, 16) || (!memcmp(x, mapped, 12) && x[12] == 127);
}

static uint16_t port_of(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET)
		return ntohs(((const struct sockaddr_in *)sa)->sin_port);
	if (sa->sa_family == AF_INET6)
		return ntohs(((const struct sockaddr_in6 *)sa)->sin6_port);
	return 0;
}

static void set_port(struct sockaddr *sa, uint16_t port)
{
	if (sa->sa_family == AF_INET)
		((struct sockaddr_in *)sa)->sin_port = htons(port);
	else if (sa->sa_family == AF_INET6)
		((struct sockaddr_in6 *)sa)->sin6_port = htons(port);
}

static socklen_t sa_len(const struct sockaddr *sa)
{
	return sa->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
}

static struct cma_nic *nic_by_addr(const struct sockaddr *sa)
{
	scan_nics();
	for (int i = 0; i < nnics; i++)
		if (same_ip((struct sockaddr *)&nics[i].addr, sa))
			return &nics[i];
	return NULL;
}

/* route_nic finds the NIC that would send to dst: the one that has dst
 * (a NIC reaches its own address), else the one with the source address
 * the host's routing picks for dst (a connected UDP socket's; nothing is
 * sent). */
static struct cma_nic *route_nic(const struct sockaddr *dst)
{
	struct cma_nic *nic = nic_by_addr(dst);
	if (nic)
		return nic;
	int fd = socket(dst->sa_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return NULL;
	struct sockaddr_storage to, src;
	memcpy(&to, dst, sa_len(dst));
	set_port((struct sockaddr *)&to, 4791);
	socklen_t l = sizeof src;
	if (connect(fd, (struct sockaddr *)&to, sa_len(dst)) || getsockname(fd, (struct sockaddr *)&src, &l)) {
		close(fd);
		return NULL;
	}
	close(fd);
	return nic_by_addr((struct sockaddr *)&src);
}

static struct ibv_context *nic_verbs(struct cma_nic *nic)
{
	pthread_mutex_lock(&nic->lock);
	if (!nic->verbs) {
		int n;
		struct ibv_device **l = ibv_get_device_list(&n);
		for (int i = 0; l && i < n; i++)
			if (!strcmp(ibv_get_device_name(l[i]), nic->name))
				nic->verbs = ibv_open_device(l[i]);
		if (l)
			ibv_free_device_list(l);
	}
	pthread_mutex_unlock(&nic->lock);
	return nic->verbs;
}

/* --- the CM socket --- */

static void put_addr(struct hostif_msg *m, const struct sockaddr *sa)
{
	uint8_t ip[16] = {0};
	int fam = sa ? ip_of(sa, ip) : 0;
	hostif_u8(m, (uint8_t)fam);
	hostif_put(m, ip, 16);
	hostif_u16(m, sa ? port_of(sa) : 0);
}

static void get_addr(struct hostif_msg *m, struct sockaddr_storage *ss)
{
	uint8_t fam = hostif_get_u8(m);
	const uint8_t *ip = hostif_get(m, 16);
	uint16_t port = hostif_get_u16(m);
	memset(ss, 0, sizeof *ss);
	if (!ip)
		return;
	if (fam == 4) {
		struct sockaddr_in *in = (struct sockaddr_in *)ss;
		in->sin_family = AF_INET;
		memcpy(&in->sin_addr, ip + 12, 4);
		in->sin_port = htons(port);
	} else if (fam == 6) {
		struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ss;
		in6->sin6_family = AF_INET6;
		memcpy(&in6->sin6_addr, ip, 16);
		in6->sin6_port = htons(port);
	}
}

static int cm_hello(int fd, uint8_t kind, uint32_t *token)
{
	struct hostif_msg m;
	hostif_begin(&m, OP_CM_HELLO, 1);
	hostif_u32(&m, CM_VERSION);
	hostif_u8(&m, kind);
	int r = hostif_call(fd, &m, NULL, NULL);
	if (r)
		return r;
	*token = hostif_get_u32(&m);
	return m.err ? EPROTO : 0;
}

/* cm_call runs a command on nic's command connection: 0, or -1 with
 * errno set (the NIC's errno). */
static int cm_call(struct cma_nic *nic, struct hostif_msg *m)
{
	int r = hostif_call(nic->cmd, m, NULL, NULL);
	if (r < 0)
		return -1;
	if (r > 0) {
		errno = r;
		return -1;
	}
	return 0;
}

/* cm_begin starts a command on nic, connecting its command connection
 * first; it returns with nic->lock held (cm_end releases it). */
static int cm_begin(struct cma_nic *nic, struct hostif_msg *m, uint16_t op)
{
	pthread_mutex_lock(&nic->lock);
	if (nic->cmd < 0) {
		uint32_t tok;
		int fd = hostif_connect(nic->cm_socket);
		if (fd < 0) {
			pthread_mutex_unlock(&nic->lock);
			return -1;
		}
		int r = cm_hello(fd, CM_COMMAND, &tok);
		if (r) {
			close(fd);
			pthread_mutex_unlock(&nic->lock);
			errno = r < 0 ? errno : r;
			return -1;
		}
		nic->cmd = fd;
	}
	hostif_begin(m, op, ++nic->seq);
	return 0;
}

static int cm_end(struct cma_nic *nic, struct hostif_msg *m)
{
	int r = cm_call(nic, m);
	int e = errno;
	pthread_mutex_unlock(&nic->lock);
	errno = e;
	return r;
}

/* --- event channels --- */

struct chan_conn {
	struct cma_nic *nic;
	int fd;
	uint32_t token;
};

struct cma_channel {
	struct rdma_event_channel ch; /* ch.fd: the epoll descriptor */
	int efd;                      /* wakes it for the library's own events */
	struct chan_conn conns[MAX_NICS];
	int nconns;
	struct cma_event **local; /* the library's events, and others' set aside by a sync wait */
	int nlocal, caplocal;
	pthread_mutex_t lock;
};

static int push_local(struct cma_channel *ch, struct cma_event *ev, int front)
{
	pthread_mutex_lock(&ch->lock);
	if (ch->nlocal == ch->caplocal) {
		int cap = ch->caplocal ? 2 * ch->caplocal : 8;
		struct cma_event **l = realloc(ch->local, cap * sizeof *l);
		if (!l) {
			pthread_mutex_unlock(&ch->lock);
			return -1;
		}
		ch->local = l;
		ch->caplocal = cap;
	}
	if (front) {
		memmove(ch->local + 1, ch->local, ch->nlocal * sizeof *ch->local);
		ch->local[0] = ev;
	} else {
		ch->local[ch->nlocal] = ev;
	}
	ch->nlocal++;
	pthread_mutex_unlock(&ch->lock);
	uint64_t one = 1;
	if (write(ch->efd, &one, 8) < 0) {
		/* the counter cannot overflow in practice; the event is queued anyway */
	}
	return 0;
}

static struct cma_event *pop_local(struct cma_channel *ch)
{
	pthread_mutex_lock(&ch->lock);
	struct cma_event *ev = NULL;
	if (ch->nlocal) {
		ev = ch->local[0];
		memmove(ch->local, ch->local + 1, --ch->nlocal * sizeof *ch->local);
	}
	pthread_mutex_unlock(&ch->lock);
	return ev;
}

struct rdma_event_channel *rdma_create_event_channel(void)
{
	struct cma_channel *ch = calloc(1, sizeof *ch);
	if (!ch) {
		errno = ENOMEM;
		return NULL;
	}
	ch->ch.fd = epoll_create1(EPOLL_CLOEXEC);
	ch->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (ch->ch.fd < 0 || ch->efd < 0) {
		int e = errno;
		if (ch->ch.fd >= 0)
			close(ch->ch.fd);
		if (ch->efd >= 0)
			close(ch->efd);
		free(ch);
		errno = e;
		return NULL;
	}
	struct epoll_event ev = {.events = EPOLLIN, .data.fd = ch->efd};
	epoll_ctl(ch->ch.fd, EPOLL_CTL_ADD, ch->efd, &ev);
	pthread_mutex_init(&ch->lock, NULL);
	return &ch->ch;
}

void rdma_destroy_event_channel(struct rdma_event_channel *channel)
{
	struct cma_channel *ch = (struct cma_channel *)channel;
	for (int i = 0; i < ch->nconns; i++)
		close(ch->conns[i].fd);
	for (int i = 0; i < ch->nlocal; i++)
		free(ch->local[i]);
	free(ch->local);
	close(ch->efd);
	close(ch->ch.fd);
	free(ch);
}

/* chan_token returns the channel's token on nic, connecting its events
 * connection there first. */
static int chan_token(struct cma_channel *ch, struct cma_nic *nic, uint32_t *token)
{
	pthread_mutex_lock(&ch->lock);
	for (int i = 0; i < ch->nconns; i++)
		if (ch->conns[i].nic == nic) {
			*token = ch->conns[i].token;
			pthread_mutex_unlock(&ch->lock);
			return 0;
		}
	int fd = hostif_connect(nic->cm_socket), r;
	if (fd < 0 || (r = cm_hello(fd, CM_EVENTS, token)) != 0) {
		int e = fd < 0 ? errno : (r < 0 ? errno : r);
		if (fd >= 0)
			close(fd);
		pthread_mutex_unlock(&ch->lock);
		errno = e;
		return -1;
	}
	if (ch->nconns == MAX_NICS) {
		close(fd);
		pthread_mutex_unlock(&ch->lock);
		errno = ENOSPC;
		return -1;
	}
	ch->conns[ch->nconns++] = (struct chan_conn){.nic = nic, .fd = fd, .token = *token};
	struct epoll_event ev = {.events = EPOLLIN, .data.fd = fd};
	epoll_ctl(ch->ch.fd, EPOLL_CTL_ADD, fd, &ev);
	pthread_mutex_unlock(&ch->lock);
	return 0;
}

/* --- ids --- */

/* The ids of this process by (NIC, handle): how an event finds its id. */
struct id_entry {
	struct cma_nic *nic;
	uint32_t handle;
	struct cma_id *id;
};
static struct id_entry *ids;
static int nids, capids;
static pthread_mutex_t ids_lock = PTHREAD_MUTEX_INITIALIZER;

static void ids_add(struct cma_id *id)
{
	pthread_mutex_lock(&ids_lock);
	if (nids == capids) {
		int cap = capids ? 2 * capids : 16;
		struct id_entry *l = realloc(ids, cap * sizeof *l);
		if (!l) {
			pthread_mutex_unlock(&ids_lock);
			return;
		}
		ids = l;
		capids = cap;
	}
	ids[nids++] = (struct id_entry){id->nic, id->handle, id};
	pthread_mutex_unlock(&ids_lock);
}

static struct cma_id *ids_find(struct cma_nic *nic, uint32_t handle)
{
	struct cma_id *id = NULL;
	pthread_mutex_lock(&ids_lock);
	for (int i = 0; i < nids; i++)
		if (ids[i].nic == nic && ids[i].handle == handle)
			id = ids[i].id;
	pthread_mutex_unlock(&ids_lock);
	return id;
}

static void ids_del(struct cma_id *id)
{
	pthread_mutex_lock(&ids_lock);
	for (int i = 0; i < nids; i++)
		if (ids[i].id == id) {
			ids[i] = ids[--nids];
			break;
		}
	pthread_mutex_unlock(&ids_lock);
}

static enum ibv_qp_type ps_qp_type(enum rdma_port_space ps)
{
	return ps == RDMA_PS_UDP || ps == RDMA_PS_IPOIB ? IBV_QPT_UD : IBV_QPT_RC;
}

static uint16_t ps_wire(enum rdma_port_space ps) { return ps == RDMA_PS_UDP ? PS_UDP : PS_TCP; }

static struct cma_id *new_id(struct rdma_event_channel *channel, void *context, enum rdma_port_space ps)
{
	struct cma_id *id = calloc(1, sizeof *id);
	if (!id)
		return NULL;
	if (!channel) {
		channel = rdma_create_event_channel();
		if (!channel) {
			free(id);
			return NULL;
		}
		id->sync = id->ownchan = 1;
	}
	id->chan = (struct cma_channel *)channel;
	id->id.channel = channel;
	id->id.context = context;
	id->id.ps = ps;
	id->id.qp_type = ps_qp_type(ps);
	id->id.port_num = 1;
	return id;
}

int rdma_create_id(struct rdma_event_channel *channel, struct rdma_cm_id **out, void *context, enum rdma_port_space ps)
{
	if (!out || (ps != RDMA_PS_TCP && ps != RDMA_PS_UDP)) {
		errno = EINVAL;
		return -1;
	}
	struct cma_id *id = new_id(channel, context, ps);
	if (!id)
		return -1;
	*out = &id->id;
	return 0;
}

static struct ibv_pd *nic_pd(struct cma_nic *nic);
static int send_options(struct cma_id *id);
int rdma_destroy_id(struct rdma_cm_id *cid);

/* place puts the id on nic's CM (its events to the id's channel), with
 * the options the NIC applies. */
static int place(struct cma_id *id, struct cma_nic *nic)
{
	if (id->nic)
		return id->nic == nic ? 0 : (errno = EINVAL, -1);
	uint32_t token;
	if (chan_token(id->chan, nic, &token))
		return -1;
	struct hostif_msg m;
	if (cm_begin(nic, &m, OP_CM_CREATE_ID))
		return -1;
	hostif_u32(&m, token);
	hostif_u16(&m, ps_wire(id->id.ps));
	hostif_u8(&m, id->id.qp_type == IBV_QPT_UD ? IBV_QPT_UD : IBV_QPT_RC);
	hostif_u64(&m, (uintptr_t)id);
	if (cm_end(nic, &m))
		return -1;
	id->handle = hostif_get_u32(&m);
	id->nic = nic;
	id->id.verbs = nic_verbs(nic);
	if (!id->id.verbs) {
		errno = ENODEV;
		return -1;
	}
	/* As librdmacm: an id on a device has the device's PD. */
	if (!id->id.pd)
		id->id.pd = nic_pd(nic);
	ids_add(id);
	return send_options(id);
}

/* cmd_id runs a command about id: the handle first, then what fill adds. */
#define CMD(id, op, m, ...)                                 \
	({                                                  \
		int r_ = cm_begin((id)->nic, &(m), (op));   \
		if (!r_) {                                  \
			hostif_u32(&(m), (id)->handle);     \
			__VA_ARGS__;                        \
			r_ = cm_end((id)->nic, &(m));       \
		}                                           \
		r_;                                         \
	})

static int send_option(struct cma_id *id, uint32_t opt, uint32_t v)
{
	struct hostif_msg m;
	return CMD(id, OP_CM_SET_OPTION, m, hostif_u32(&m, opt); hostif_u32(&m, v));
}

/* send_options gives the NIC the options set before the id reached it
 * (the kernel holds them from rdma_set_option on). An AFONLY the program
 * did not set is the NIC's to choose at bind, as the kernel's default. */
static int send_options(struct cma_id *id)
{
	if ((id->afonly_set && send_option(id, CM_OPT_AFONLY, (uint32_t)id->afonly)) ||
	    (id->reuseaddr && send_option(id, CM_OPT_REUSEADDR, 1)) ||
	    (id->tos && send_option(id, CM_OPT_TOS, (uint32_t)id->tos - 1)) ||
	    (id->ack_timeout && send_option(id, CM_OPT_ACK_TIMEOUT, (uint32_t)id->ack_timeout - 1)))
		return -1;
	return 0;
}

/* unplace takes the id off its NIC again, after a bind that failed: as
 * the kernel's, such an id is back where it was (not bound) and may
 * bind again. errno is kept. */
static void unplace(struct cma_id *id)
{
	int e = errno;
	struct hostif_msg m;
	CMD(id, OP_CM_DESTROY_ID, m, (void)0);
	ids_del(id);
	if (id->id.pd && id->id.pd == id->nic->pd)
		id->id.pd = NULL;
	id->id.verbs = NULL;
	id->nic = NULL;
	id->handle = 0;
	errno = e;
}

static int add_sub(struct cma_id *w, struct cma_id *sub)
{
	struct cma_id **l = realloc(w->subs, (w->nsubs + 1) * sizeof *l);
	if (!l) {
		errno = ENOMEM;
		return -1;
	}
	w->subs = l;
	w->subs[w->nsubs++] = sub;
	return 0;
}

/* bind_sub makes the part of the wildcard id w on nic: a sub-id bound to
 * w's wildcard address and *port there (0: the NIC picks one, returned
 * in *port), so that the NIC holds the port for w. NULL with errno (the
 * NIC's refusal), or with *reached 0 if the NIC cannot be reached (its
 * process is gone: the wildcard does without it). */
static struct cma_id *bind_sub(struct cma_id *w, struct cma_nic *nic, uint16_t *port, int *reached)
{
	*reached = 1;
	struct cma_id *sub = new_id(w->id.channel, w->id.context, w->id.ps);
	if (!sub)
		return NULL;
	sub->parent = w;
	/* w's options: the part may become w itself (adopt). */
	sub->afonly = w->afonly;
	sub->afonly_set = w->afonly_set;
	sub->reuseaddr = w->reuseaddr;
	sub->tos = w->tos;
	sub->ack_timeout = w->ack_timeout;
	if (place(sub, nic)) {
		if (sub->nic)
			unplace(sub);
		free(sub);
		*reached = 0;
		return NULL;
	}
	struct sockaddr_storage a;
	memcpy(&a, &w->id.route.addr.src_storage, sizeof a);
	if (w->loopback) { /* the family's wildcard on each NIC */
		struct sockaddr *sa = (struct sockaddr *)&a;
		if (sa->sa_family == AF_INET)
			memset(&((struct sockaddr_in *)sa)->sin_addr, 0, 4);
		else
			memset(&((struct sockaddr_in6 *)sa)->sin6_addr, 0, 16);
	}
	set_port((struct sockaddr *)&a, *port);
	struct hostif_msg m;
	if (CMD(sub, OP_CM_BIND, m, put_addr(&m, (struct sockaddr *)&a))) {
		unplace(sub);
		free(sub);
		return NULL;
	}
	*port = hostif_get_u16(&m);
	return sub;
}

/* drop_subs destroys the parts of a wildcard id. */
static void drop_subs(struct cma_id *w)
{
	for (int i = 0; i < w->nsubs; i++)
		rdma_destroy_id(&w->subs[i]->id);
	free(w->subs);
	w->subs = NULL;
	w->nsubs = 0;
}

/* bind_wildcard binds w (its src_addr a wildcard address, w->port its
 * port or 0) on every NIC, as the kernel binds a wildcard id on the
 * host: a NIC whose holders of the port conflict with it (another
 * program's, or this one's, ids) refuses it, and the bind fails with
 * that NIC's errno. Port 0 is one the first NIC picks and every other
 * NIC has free (another is tried if one does not). */
static int bind_wildcard(struct cma_id *w)
{
	scan_nics();
	for (int try = 0; try < 16; try++) {
		uint16_t port = w->port;
		int err = 0;
		for (int i = 0; i < nnics && !err; i++) {
			int reached;
			struct cma_id *sub = bind_sub(w, &nics[i], &port, &reached);
			if (!sub) {
				if (reached)
					err = errno;
				continue;
			}
			if (add_sub(w, sub)) {
				err = errno;
				rdma_destroy_id(&sub->id);
			}
		}
		if (!err) {
			w->port = port ? port : 32768 + (uint16_t)(rand() % (61000 - 32768));
			return 0;
		}
		drop_subs(w);
		if (w->port || (err != EADDRINUSE && err != EADDRNOTAVAIL)) {
			errno = err;
			return -1;
		}
	}
	errno = EADDRNOTAVAIL; /* as the kernel when it finds no free port */
	return -1;
}

static void set_route_gids(struct cma_id *id)
{
	struct rdma_addr *a = &id->id.route.addr;
	uint8_t ip[16];
	if (ip_of(&a->src_addr, ip))
		memcpy(a->addr.ibaddr.sgid.raw, ip, 16);
	if (ip_of(&a->dst_addr, ip))
		memcpy(a->addr.ibaddr.dgid.raw, ip, 16);
	a->addr.ibaddr.pkey = htobe16(0xffff);
}

int rdma_bind_addr(struct rdma_cm_id *cid, struct sockaddr *addr)
{
	struct cma_id *id = (struct cma_id *)cid;
	if (!addr || (addr->sa_family != AF_INET && addr->sa_family != AF_INET6) || id->nic || id->wildcard) {
		errno = EINVAL;
		return -1;
	}
	memcpy(&cid->route.addr.src_storage, addr, sa_len(addr));
	/* A loopback address counts as a wildcard, as the kernel's
	 * cma_any_addr counts it: bound to no device (verbs NULL), its
	 * port held on every NIC, a listener taking requests of any
	 * address. libfabric's verbs provider binds "localhost" so, to
	 * learn the devices' addresses. A NIC on a loopback address (rnic
	 * puts its NICs on 127.0.0.x) is bound as any NIC is. */
	id->loopback = !is_any(addr) && is_loopback(addr) && !nic_by_addr(addr);
	if (is_any(addr) || id->loopback) {
		id->port = port_of(addr);
		if (bind_wildcard(id)) {
			int e = errno;
			memset(&cid->route.addr.src_storage, 0, sizeof cid->route.addr.src_storage);
			id->port = 0;
			id->loopback = 0;
			errno = e;
			return -1;
		}
		id->wildcard = 1;
		set_port(&cid->route.addr.src_addr, id->port);
		return 0;
	}
	struct cma_nic *nic = nic_by_addr(addr);
	if (!nic) {
		memset(&cid->route.addr.src_storage, 0, sizeof cid->route.addr.src_storage);
		errno = EADDRNOTAVAIL;
		return -1;
	}
	struct hostif_msg m;
	if (place(id, nic) || CMD(id, OP_CM_BIND, m, put_addr(&m, addr))) {
		int e = errno;
		if (id->nic)
			unplace(id);
		memset(&cid->route.addr.src_storage, 0, sizeof cid->route.addr.src_storage);
		errno = e;
		return -1;
	}
	set_port(&cid->route.addr.src_addr, hostif_get_u16(&m));
	set_route_gids(id);
	return 0;
}

/* --- events --- */

static const char *event_names[] = {
	"RDMA_CM_EVENT_ADDR_RESOLVED", "RDMA_CM_EVENT_ADDR_ERROR", "RDMA_CM_EVENT_ROUTE_RESOLVED",
	"RDMA_CM_EVENT_ROUTE_ERROR", "RDMA_CM_EVENT_CONNECT_REQUEST", "RDMA_CM_EVENT_CONNECT_RESPONSE",
	"RDMA_CM_EVENT_CONNECT_ERROR", "RDMA_CM_EVENT_UNREACHABLE", "RDMA_CM_EVENT_REJECTED",
	"RDMA_CM_EVENT_ESTABLISHED", "RDMA_CM_EVENT_DISCONNECTED", "RDMA_CM_EVENT_DEVICE_REMOVAL",
	"RDMA_CM_EVENT_MULTICAST_JOIN", "RDMA_CM_EVENT_MULTICAST_ERROR", "RDMA_CM_EVENT_ADDR_CHANGE",
	"RDMA_CM_EVENT_TIMEWAIT_EXIT",
};

const char *rdma_event_str(enum rdma_cm_event_type event)
{
	if ((unsigned)event < sizeof event_names / sizeof *event_names)
		return event_names[event];
	return "UNKNOWN EVENT";
}

static int modify_qp(struct cma_id *id, enum ibv_qp_state state);

/* ready_qp moves the id's RC QP through INIT (again: the access flags
 * the connection agreed), RTR and RTS with the CM's attributes, as
 * librdmacm does before it accepts or confirms a connection. */
static int ready_qp(struct cma_id *id)
{
	return modify_qp(id, IBV_QPS_INIT) || modify_qp(id, IBV_QPS_RTR) || modify_qp(id, IBV_QPS_RTS) ? -1 : 0;
}

/* confirm sends the RTU of an active id whose REP came (the NIC's
 * ACCEPT of an id in REP_RCVD takes no parameters but the QPN). */
static int confirm(struct cma_id *id)
{
	struct hostif_msg m;
	return CMD(id, OP_CM_ACCEPT, m, hostif_u32(&m, id->id.qp ? id->id.qp->qp_num : 0); hostif_put(&m, "\0\0\0\0\0\0", 6);
		   hostif_bytes(&m, NULL, 0));
}

/* local_event queues an event the library makes (no NIC involved). */
static void local_event(struct cma_id *id, enum rdma_cm_event_type type, int status)
{
	struct cma_event *ev = calloc(1, sizeof *ev);
	if (!ev)
		return;
	ev->ev.id = &id->id;
	ev->ev.event = type;
	ev->ev.status = status;
	push_local(id->chan, ev, 0);
}

/* take turns a NIC's event message into the program's event; it
 * returns NULL for what the program does not see. */
static struct cma_event *take(struct cma_nic *nic, struct hostif_msg *m)
{
	/* The uids are skipped: an id is found by its handle on the NIC,
	 * never by the pointer an event carries (an event can come after
	 * rdma_destroy_id). */
	(void)hostif_get_u64(m);
	uint32_t handle = hostif_get_u32(m), lhandle = hostif_get_u32(m);
	(void)hostif_get_u64(m);
	uint32_t type = hostif_get_u32(m);
	int32_t status = (int32_t)hostif_get_u32(m);
	struct sockaddr_storage src, dst;
	get_addr(m, &src);
	get_addr(m, &dst);
	struct rdma_conn_param p = {0};
	p.qp_num = hostif_get_u32(m);
	p.responder_resources = hostif_get_u8(m);
	p.initiator_depth = hostif_get_u8(m);
	p.flow_control = hostif_get_u8(m);
	p.retry_count = hostif_get_u8(m);
	p.rnr_retry_count = hostif_get_u8(m);
	p.srq = hostif_get_u8(m);
	uint16_t plen = hostif_get_u16(m);
	const uint8_t *priv = hostif_get(m, plen);
	uint32_t udqpn = hostif_get_u32(m), udqkey = hostif_get_u32(m);
	if (m->err)
		return NULL;
	struct cma_event *ev = calloc(1, sizeof *ev);
	if (!ev)
		return NULL;
	plen = plen > MAX_PRIVATE ? MAX_PRIVATE : plen;
	memcpy(ev->private, priv, plen);
	struct cma_id *id;
	if (type == RDMA_CM_EVENT_CONNECT_REQUEST) {
		struct cma_id *l = ids_find(nic, lhandle);
		if (!l) {
			free(ev);
			return NULL;
		}
		struct cma_id *pub = l->parent ? l->parent : l;
		id = calloc(1, sizeof *id);
		if (!id) {
			free(ev);
			return NULL;
		}
		id->chan = pub->chan;
		id->sync = pub->sync;
		id->id.channel = pub->id.channel;
		id->id.context = pub->id.context;
		id->id.ps = pub->id.ps;
		id->id.qp_type = pub->id.qp_type;
		id->id.port_num = 1;
		id->id.verbs = nic_verbs(nic);
		id->nic = nic;
		id->handle = handle;

		id->id.pd = pub->id.pd && pub->id.pd->context == id->id.verbs ? pub->id.pd : nic_pd(nic);
		memcpy(&id->id.route.addr.src_storage, &src, sizeof src);
		memcpy(&id->id.route.addr.dst_storage, &dst, sizeof dst);
		set_route_gids(id);
		ids_add(id);
		ev->ev.listen_id = &pub->id;
	} else {
		id = ids_find(nic, handle);
		if (!id) {
			free(ev);
			return NULL;
		}
	}
	ev->ev.id = &id->id;
	ev->ev.event = type;
	ev->ev.status = status;
	if (id->id.qp_type == IBV_QPT_UD && (type == RDMA_CM_EVENT_ESTABLISHED || type == RDMA_CM_EVENT_CONNECT_REQUEST)) {
		struct rdma_ud_param *ud = &ev->ev.param.ud;
		ud->private_data = ev->private;
		ud->private_data_len = (uint8_t)(plen > 255 ? 255 : plen);
		ud->qp_num = udqpn;
		ud->qkey = udqkey;
		ud->ah_attr.is_global = 1;
		ud->ah_attr.port_num = 1;
		ud->ah_attr.grh.sgid_index = 1;
		ud->ah_attr.grh.hop_limit = 64;
		memcpy(ud->ah_attr.grh.dgid.raw, id->id.route.addr.addr.ibaddr.dgid.raw, 16);
	} else {
		p.private_data = plen ? ev->private : NULL;
		p.private_data_len = (uint8_t)(plen > 255 ? 255 : plen);
		ev->ev.param.conn = p;
	}
	/* A CONNECT_RESPONSE of an id with a QP, as librdmacm: the QP to RTR
	 * and RTS, the RTU, and the program sees ESTABLISHED (or
	 * CONNECT_ERROR). Without a QP the program readies its own and
	 * calls rdma_establish. */
	if (type == RDMA_CM_EVENT_CONNECT_RESPONSE && id->id.qp) {
		if (ready_qp(id)) {
			ev->ev.event = RDMA_CM_EVENT_CONNECT_ERROR;
			ev->ev.status = -errno;
			rdma_reject(&id->id, NULL, 0);
		} else if (confirm(id)) {
			ev->ev.event = RDMA_CM_EVENT_CONNECT_ERROR;
			ev->ev.status = -errno;
		} else {
			ev->ev.event = RDMA_CM_EVENT_ESTABLISHED;
		}
	}
	return ev;
}

/* device_removed queues DEVICE_REMOVAL for every id of ch on nic. */
static void device_removed(struct cma_channel *ch, struct cma_nic *nic)
{
	pthread_mutex_lock(&ids_lock);
	for (int i = 0; i < nids; i++) {
		struct cma_id *id = ids[i].id;
		/* A wildcard id's part is not the program's: as the kernel
		 * drops a wildcard listener's listen on a device removed, the
		 * wildcard id goes on without it, with no event. */
		if (ids[i].nic != nic || id->chan != ch || id->parent)
			continue;
		struct cma_event *ev = calloc(1, sizeof *ev);
		if (!ev)
			continue;
		ev->ev.id = &id->id;
		ev->ev.event = RDMA_CM_EVENT_DEVICE_REMOVAL;
		push_local(ch, ev, 0);
	}
	pthread_mutex_unlock(&ids_lock);
	/* The NIC's command connection is gone too: a new one next time. */
	pthread_mutex_lock(&nic->lock);
	if (nic->cmd >= 0) {
		close(nic->cmd);
		nic->cmd = -1;
	}
	pthread_mutex_unlock(&nic->lock);
}

/* next_event waits for the channel's next event (EAGAIN if the channel
 * is non-blocking and none is there). */
static int next_event(struct cma_channel *ch, struct cma_event **out)
{
	for (;;) {
		struct cma_event *ev = pop_local(ch);
		if (ev) {
			*out = ev;
			return 0;
		}
		int nonblock = fcntl(ch->ch.fd, F_GETFL) & O_NONBLOCK;
		struct epoll_event e;
		int n = epoll_wait(ch->ch.fd, &e, 1, nonblock ? 0 : -1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -1;
		if (n == 0) {
			errno = EAGAIN;
			return -1;
		}
		if (e.data.fd == ch->efd) {
			uint64_t c;
			if (read(ch->efd, &c, 8) < 0) {
				/* nothing to clear: another reader took it */
			}
			continue;
		}
		struct chan_conn *cc = NULL;
		pthread_mutex_lock(&ch->lock);
		for (int i = 0; i < ch->nconns; i++)
			if (ch->conns[i].fd == e.data.fd)
				cc = &ch->conns[i];
		pthread_mutex_unlock(&ch->lock);
		if (!cc)
			continue;
		struct hostif_msg m;
		ssize_t k = recv(cc->fd, m.b, sizeof m.b, MSG_DONTWAIT);
		if (k < 0 && (errno == EAGAIN || errno == EINTR))
			continue;
		if (k <= 0) {
			/* The NIC went away: its connection leaves the channel,
			 * and each id of the channel on it gets DEVICE_REMOVAL,
			 * as the kernel reports a device that is gone. */
			epoll_ctl(ch->ch.fd, EPOLL_CTL_DEL, cc->fd, NULL);
			device_removed(ch, cc->nic);
			continue;
		}
		m.len = k;
		m.off = HOSTIF_HEADER;
		m.err = k < HOSTIF_HEADER || m.b[2] != OP_CM_EVENT;
		if (m.err)
			continue;
		ev = take(cc->nic, &m);
		if (ev) {
			*out = ev;
			return 0;
		}
	}
}

int rdma_get_cm_event(struct rdma_event_channel *channel, struct rdma_cm_event **event)
{
	struct cma_event *ev;
	if (!channel || !event) {
		errno = EINVAL;
		return -1;
	}
	if (next_event((struct cma_channel *)channel, &ev))
		return -1;
	*event = &ev->ev;
	return 0;
}

int rdma_ack_cm_event(struct rdma_cm_event *event)
{
	if (!event) {
		errno = EINVAL;
		return -1;
	}
	free(event);
	return 0;
}

/* wait_for waits, for a sync id, for its event of type want; events of
 * other ids met on the way are set aside for later. 0, or -1 with errno
 * (the event's status or what came instead). */
static int wait_for(struct cma_id *id, enum rdma_cm_event_type want, struct cma_event **keep)
{
	struct cma_event *aside[64];
	int naside = 0, ret = -1;
	for (;;) {
		struct cma_event *ev;
		if (next_event(id->chan, &ev))
			break;
		if (ev->ev.id != &id->id && !(want == RDMA_CM_EVENT_CONNECT_REQUEST && ev->ev.listen_id == &id->id)) {
			if (naside < 64)
				aside[naside++] = ev;
			else
				free(ev);
			continue;
		}
		if (ev->ev.event == want) {
			ret = 0;
			if (keep)
				*keep = ev;
			else
				free(ev);
		} else {
			errno = ev->ev.status < 0 ? -ev->ev.status : (ev->ev.event == RDMA_CM_EVENT_REJECTED ? ECONNREFUSED : EIO);
			free(ev);
		}
		break;
	}
	for (int i = naside - 1; i >= 0; i--)
		push_local(id->chan, aside[i], 1);
	return ret;
}

/* --- address and route --- */

/* adopt makes a wildcard id that resolves an id of nic: its part there
 * becomes the id itself, still holding the port (the NIC makes its
 * address the NIC's, as the kernel's id takes the source address it
 * resolved), and its other parts go. */
static void adopt(struct cma_id *w, struct cma_nic *nic)
{
	struct cma_id *part = NULL;
	for (int i = 0; i < w->nsubs; i++) {
		if (!part && w->subs[i]->nic == nic)
			part = w->subs[i];
		else
			rdma_destroy_id(&w->subs[i]->id);
	}
	free(w->subs);
	w->subs = NULL;
	w->nsubs = 0;
	w->wildcard = 0;
	if (!part)
		return; /* no part there (a NIC that came later): RESOLVE_ADDR binds the port */
	ids_del(part);
	w->nic = part->nic;
	w->handle = part->handle;
	w->id.verbs = part->id.verbs;
	if (!w->id.pd)
		w->id.pd = part->id.pd;
	ids_add(w);
	free(part);
}

int rdma_resolve_addr(struct rdma_cm_id *cid, struct sockaddr *src, struct sockaddr *dst, int timeout_ms)
{
	(void)timeout_ms; /* resolution is local: it takes no time */
	struct cma_id *id = (struct cma_id *)cid;
	if (!dst || (dst->sa_family != AF_INET && dst->sa_family != AF_INET6) || id->listening) {
		errno = EINVAL;
		return -1;
	}
	/* A bound id keeps its source, as the kernel ignores src then. */
	struct cma_nic *nic = NULL;
	if (id->nic)
		nic = id->nic;
	else if (src && !is_any(src) && !id->wildcard)
		nic = nic_by_addr(src);
	else
		nic = route_nic(dst);
	if (!nic) {
		/* No NIC serves the route: ADDR_ERROR, as the kernel reports
		 * an address of no RDMA device. */
		if (id->sync) {
			errno = ENODEV;
			return -1;
		}
		memcpy(&cid->route.addr.dst_storage, dst, sa_len(dst));
		local_event(id, RDMA_CM_EVENT_ADDR_ERROR, -ENODEV);
		return 0;
	}
	if (id->wildcard)
		adopt(id, nic);
	if (place(id, nic))
		return -1;
	struct sockaddr_storage s;
	memcpy(&s, &nic->addr, sizeof s);
	set_port((struct sockaddr *)&s, src ? port_of(src) : port_of(&cid->route.addr.src_addr));
	struct hostif_msg m;
	if (CMD(id, OP_CM_RESOLVE_ADDR, m, put_addr(&m, (struct sockaddr *)&s); put_addr(&m, dst)))
		return -1;
	memcpy(&cid->route.addr.src_storage, &s, sizeof s);
	memcpy(&cid->route.addr.dst_storage, dst, sa_len(dst));
	set_route_gids(id);
	if (id->sync)
		return wait_for(id, RDMA_CM_EVENT_ADDR_RESOLVED, NULL);
	return 0;
}

int rdma_resolve_route(struct rdma_cm_id *cid, int timeout_ms)
{
	(void)timeout_ms;
	struct cma_id *id = (struct cma_id *)cid;
	if (!id->nic) {
		errno = EINVAL;
		return -1;
	}
	struct hostif_msg m;
	if (CMD(id, OP_CM_RESOLVE_ROUTE, m, (void)0))
		return -1;
	struct ibv_port_attr pa;
	struct ibv_sa_path_rec *p = &id->path;
	memset(p, 0, sizeof *p);
	memcpy(p->sgid.raw, cid->route.addr.addr.ibaddr.sgid.raw, 16);
	memcpy(p->dgid.raw, cid->route.addr.addr.ibaddr.dgid.raw, 16);
	p->pkey = htobe16(0xffff);
	p->hop_limit = 64;
	p->reversible = 1;
	p->numb_path = 1;
	p->mtu_selector = 2;
	p->mtu = ibv_query_port(cid->verbs, 1, &pa) ? IBV_MTU_1024 : pa.active_mtu;
	p->packet_life_time_selector = 2;
	/* What the NIC's route has (cm's route): the TOS and ACK_TIMEOUT
	 * set by now, the flow label rdma_cm hashes from the ports. */
	p->packet_life_time = id->ack_timeout > 1 ? (uint8_t)(id->ack_timeout - 2) : 18;
	p->traffic_class = id->tos ? (uint8_t)(id->tos - 1) : 0;
	p->flow_label = htobe32((port_of(&cid->route.addr.src_addr) * 31u + port_of(&cid->route.addr.dst_addr)) & 0xfffff);
	p->rate_selector = 2;
	cid->route.path_rec = p;
	cid->route.num_paths = 1;
	if (id->sync)
		return wait_for(id, RDMA_CM_EVENT_ROUTE_RESOLVED, NULL);
	return 0;
}

/* --- QPs --- */

/* modify_qp moves the id's QP to state with the CM's attributes. */
static int modify_qp(struct cma_id *id, enum ibv_qp_state state)
{
	struct ibv_qp_attr a;
	int mask;
	if (rdma_init_qp_attr(&id->id, (a.qp_state = state, &a), &mask))
		return -1;
	return ibv_modify_qp(id->id.qp, &a, mask) ? (errno = errno ? errno : EINVAL, -1) : 0;
}

int rdma_init_qp_attr(struct rdma_cm_id *cid, struct ibv_qp_attr *a, int *mask)
{
	struct cma_id *id = (struct cma_id *)cid;
	if (!id->nic || !a || !mask) {
		errno = EINVAL;
		return -1;
	}
	enum ibv_qp_state state = a->qp_state;
	struct hostif_msg m;
	if (CMD(id, OP_CM_INIT_QP_ATTR, m, hostif_u8(&m, (uint8_t)state)))
		return -1;
	memset(a, 0, sizeof *a);
	*mask = (int)hostif_get_u32(&m);
	a->qp_state = hostif_get_u8(&m);
	a->path_mtu = hostif_get_u8(&m);
	a->dest_qp_num = hostif_get_u32(&m);
	a->rq_psn = hostif_get_u32(&m);
	a->sq_psn = hostif_get_u32(&m);
	a->max_dest_rd_atomic = hostif_get_u8(&m);
	a->max_rd_atomic = hostif_get_u8(&m);
	a->min_rnr_timer = hostif_get_u8(&m);
	a->timeout = hostif_get_u8(&m);
	a->retry_cnt = hostif_get_u8(&m);
	a->rnr_retry = hostif_get_u8(&m);
	a->qkey = hostif_get_u32(&m);
	a->pkey_index = hostif_get_u16(&m);
	a->port_num = hostif_get_u8(&m);
	a->qp_access_flags = (int)hostif_get_u32(&m);
	const uint8_t *g = hostif_get(&m, 16);
	if (g)
		memcpy(a->ah_attr.grh.dgid.raw, g, 16);
	a->ah_attr.grh.sgid_index = hostif_get_u8(&m);
	a->ah_attr.grh.hop_limit = hostif_get_u8(&m);
	a->ah_attr.grh.flow_label = hostif_get_u32(&m);
	a->ah_attr.grh.traffic_class = hostif_get_u8(&m);
	if (m.err) {
		errno = EPROTO;
		return -1;
	}
	/* The address vector is the route's (its traffic class the TOS the
	 * route was resolved with, or the REQ's); an ACK_TIMEOUT set
	 * overrides the QP's timeout, as the kernel's rdma_init_qp_attr. */
	if (*mask & IBV_QP_AV) {
		a->ah_attr.is_global = 1;
		a->ah_attr.port_num = 1;
	}
	if ((*mask & IBV_QP_TIMEOUT) && id->ack_timeout)
		a->timeout = (uint8_t)(id->ack_timeout - 1);
	return 0;
}

static struct ibv_pd *nic_pd(struct cma_nic *nic)
{
	pthread_mutex_lock(&nic->lock);
	if (!nic->pd && nic->verbs)
		nic->pd = ibv_alloc_pd(nic->verbs);
	pthread_mutex_unlock(&nic->lock);
	return nic->pd;
}

static void destroy_cqs(struct rdma_cm_id *cid)
{
	if (cid->recv_cq && cid->recv_cq != cid->send_cq)
		ibv_destroy_cq(cid->recv_cq);
	if (cid->send_cq)
		ibv_destroy_cq(cid->send_cq);
	if (cid->recv_cq_channel && cid->recv_cq_channel != cid->send_cq_channel)
		ibv_destroy_comp_channel(cid->recv_cq_channel);
	if (cid->send_cq_channel)
		ibv_destroy_comp_channel(cid->send_cq_channel);
	cid->recv_cq = cid->send_cq = NULL;
	cid->recv_cq_channel = cid->send_cq_channel = NULL;
}

/* create_cqs makes the CQs (and completion channels) a QP given none
 * takes, as librdmacm does. */
static int create_cqs(struct rdma_cm_id *cid, uint32_t send_size, uint32_t recv_size)
{
	if (recv_size) {
		cid->recv_cq_channel = ibv_create_comp_channel(cid->verbs);
		if (!cid->recv_cq_channel)
			goto err;
		cid->recv_cq = ibv_create_cq(cid->verbs, recv_size, cid, cid->recv_cq_channel, 0);
		if (!cid->recv_cq)
			goto err;
	}
	if (send_size) {
		cid->send_cq_channel = ibv_create_comp_channel(cid->verbs);
		if (!cid->send_cq_channel)
			goto err;
		cid->send_cq = ibv_create_cq(cid->verbs, send_size, cid, cid->send_cq_channel, 0);
		if (!cid->send_cq)
			goto err;
	}
	return 0;
err:
	destroy_cqs(cid);
	return -1;
}

int rdma_create_qp(struct rdma_cm_id *cid, struct ibv_pd *pd, struct ibv_qp_init_attr *attr)
{
	struct cma_id *id = (struct cma_id *)cid;
	if (!id->nic || !attr || cid->qp) {
		errno = EINVAL;
		return -1;
	}
	if (!pd)
		pd = cid->pd ? cid->pd : nic_pd(id->nic);
	if (!pd || pd->context != cid->verbs) {
		errno = EINVAL;
		return -1;
	}
	struct ibv_qp_init_attr a = *attr;
	a.qp_type = cid->qp_type;
	int made = 0;
	if (!a.send_cq || !a.recv_cq) {
		if (create_cqs(cid, a.send_cq ? 0 : a.cap.max_send_wr, a.recv_cq || a.srq ? 0 : a.cap.max_recv_wr))
			return -1;
		made = 1;
		if (!a.send_cq)
			a.send_cq = cid->send_cq;
		if (!a.recv_cq)
			a.recv_cq = cid->recv_cq ? cid->recv_cq : a.send_cq;
	}
	if (!a.srq)
		a.srq = cid->srq;
	struct ibv_qp *qp = ibv_create_qp(pd, &a);
	if (!qp) {
		if (made)
			destroy_cqs(cid);
		return -1;
	}
	cid->qp = qp;
	cid->pd = pd;
	int r;
	if (cid->qp_type == IBV_QPT_UD) {
		r = modify_qp(id, IBV_QPS_INIT);
		struct ibv_qp_attr rtr = {.qp_state = IBV_QPS_RTR}, rts = {.qp_state = IBV_QPS_RTS, .sq_psn = 0};
		if (!r)
			r = ibv_modify_qp(qp, &rtr, IBV_QP_STATE) ? -1 : 0;
		if (!r)
			r = ibv_modify_qp(qp, &rts, IBV_QP_STATE | IBV_QP_SQ_PSN) ? -1 : 0;
	} else {
		r = modify_qp(id, IBV_QPS_INIT);
	}
	if (r) {
		int e = errno;
		ibv_destroy_qp(qp);
		cid->qp = NULL;
		if (made)
			destroy_cqs(cid);
		errno = e;
		return -1;
	}
	*attr = a;
	return 0;
}

int rdma_create_qp_ex(struct rdma_cm_id *cid, struct ibv_qp_init_attr_ex *ex)
{
	if (!ex || (ex->comp_mask & ~(uint32_t)IBV_QP_INIT_ATTR_PD)) {
		errno = ENOSYS; /* only what ibv_qp_init_attr holds, and the PD */
		return -1;
	}
	struct ibv_qp_init_attr a = {.qp_context = ex->qp_context, .send_cq = ex->send_cq, .recv_cq = ex->recv_cq,
				     .srq = ex->srq, .cap = ex->cap, .qp_type = ex->qp_type, .sq_sig_all = ex->sq_sig_all};
	int r = rdma_create_qp(cid, ex->pd, &a);
	if (!r)
		ex->cap = a.cap;
	return r;
}

void rdma_destroy_qp(struct rdma_cm_id *cid)
{
	if (cid->qp)
		ibv_destroy_qp(cid->qp);
	cid->qp = NULL;
	destroy_cqs(cid);
}

struct ibv_srq *rdma_create_srq(struct rdma_cm_id *cid, struct ibv_pd *pd, struct ibv_srq_init_attr *attr)
{
	struct cma_id *id = (struct cma_id *)cid;
	if (!id->nic) {
		errno = EINVAL;
		return NULL;
	}
	if (!pd)
		pd = cid->pd ? cid->pd : nic_pd(id->nic);
	struct ibv_srq *srq = ibv_create_srq(pd, attr);
	if (srq) {
		cid->srq = srq;
		cid->pd = pd;
	}
	return srq;
}

int rdma_create_srq_ex(struct rdma_cm_id *cid, struct ibv_srq_init_attr_ex *attr)
{
	if (!attr || (attr->comp_mask & ~(uint32_t)IBV_SRQ_INIT_ATTR_PD)) {
		errno = ENOSYS;
		return -1;
	}
	struct ibv_srq_init_attr a = {.srq_context = attr->srq_context, .attr = attr->attr};
	return rdma_create_srq(cid, attr->pd, &a) ? 0 : -1;
}

void rdma_destroy_srq(struct rdma_cm_id *cid)
{
	if (cid->srq)
		ibv_destroy_srq(cid->srq);
	cid->srq = NULL;
}

/* --- connecting --- */

static void put_param(struct hostif_msg *m, struct cma_id *id, struct rdma_conn_param *p, int accept)
{
	struct ibv_device_attr da;
	uint8_t resp = 1, init = 1;
	if (!ibv_query_device(id->id.verbs, &da)) {
		resp = da.max_qp_rd_atom > 255 ? 255 : da.max_qp_rd_atom;
		init = da.max_qp_init_rd_atom > 255 ? 255 : da.max_qp_init_rd_atom;
	}
	uint32_t qpn = id->id.qp ? id->id.qp->qp_num : (p ? p->qp_num : 0);
	hostif_u32(m, qpn);
	if (p) {
		hostif_u8(m, p->responder_resources < resp ? p->responder_resources : resp);
		hostif_u8(m, p->initiator_depth < init ? p->initiator_depth : init);
		hostif_u8(m, p->flow_control);
		hostif_u8(m, p->retry_count > 7 ? 7 : p->retry_count);
		hostif_u8(m, p->rnr_retry_count > 7 ? 7 : p->rnr_retry_count);
		hostif_u8(m, p->srq || id->id.srq);
		hostif_bytes(m, p->private_data, p->private_data ? p->private_data_len : 0);
	} else {
		/* No parameters: the device's depths (an accept takes the
		 * request's), 7 retries, as librdmacm. */
		hostif_u8(m, accept ? 255 : resp);
		hostif_u8(m, accept ? 255 : init);
		hostif_u8(m, 0);
		hostif_u8(m, 7);
		hostif_u8(m, 7);
		hostif_u8(m, id->id.srq != NULL);
		hostif_bytes(m, NULL, 0);
	}
}

int rdma_connect(struct rdma_cm_id *cid, struct rdma_conn_param *p)
{
	struct cma_id *id = (struct cma_id *)cid;
	if (!id->nic || (p && p->private_data_len && !p->private_data)) {
		errno = EINVAL;
		return -1;
	}
	struct hostif_msg m;
	if (CMD(id, OP_CM_CONNECT, m, put_param(&m, id, p, 0)))
		return -1;
	if (id->sync)
		return wait_for(id, RDMA_CM_EVENT_ESTABLISHED, NULL);
	return 0;
}

int rdma_establish(struct rdma_cm_id *cid)
{
	struct cma_id *id = (struct cma_id *)cid;
	if (!id->nic) {
		errno = EINVAL;
		return -1;
	}
	return confirm(id);
}

/* rebind_sub binds the part i of the wildcard id w afresh (a part that
 * listened and must not any more); a NIC that refuses it now is left
 * out of w. */
static void rebind_sub(struct cma_id *w, int i)
{
	struct cma_nic *nic = w->subs[i]->nic;
	rdma_destroy_id(&w->subs[i]->id);
	uint16_t port = w->port;
	int reached;
	struct cma_id *sub = bind_sub(w, nic, &port, &reached);
	if (sub)
		w->subs[i] = sub;
	else
		w->subs[i] = w->subs[--w->nsubs];
}

/* listen_wildcard listens on every NIC for the wildcard id w (the
 * kernel's cma_listen_on_all) through its parts; each NIC decides which
 * requests its part takes (its address family, AFONLY). NICs that came
 * since the bind get a part first (one that cannot have the port is left
 * out, as the kernel leaves out a device it cannot listen on). */
static int listen_wildcard(struct cma_id *w, int backlog)
{
	scan_nics();
	for (int i = 0; i < nnics; i++) {
		int have = 0;
		for (int j = 0; j < w->nsubs; j++)
			have |= w->subs[j]->nic == &nics[i];
		if (have)
			continue;
		uint16_t port = w->port;
		int reached;
		struct cma_id *sub = bind_sub(w, &nics[i], &port, &reached);
		if (sub && add_sub(w, sub))
			rdma_destroy_id(&sub->id);
	}
	for (int i = 0; i < w->nsubs; i++) {
		struct hostif_msg m;
		if (CMD(w->subs[i], OP_CM_LISTEN, m, hostif_u32(&m, (uint32_t)backlog))) {
			/* As the kernel's, an id whose listen fails (REUSEADDR:
			 * a listener may not share its port) is left bound. */
			int e = errno;
			for (int j = i - 1; j >= 0; j--)
				rebind_sub(w, j);
			errno = e;
			return -1;
		}
	}
	w->listening = 1;
	if (!w->id.verbs && w->nsubs)
		w->id.verbs = w->subs[0]->id.verbs;
	return 0;
}

int rdma_listen(struct rdma_cm_id *cid, int backlog)
{
	struct cma_id *id = (struct cma_id *)cid;
	if (id->listening) {
		errno = EINVAL;
		return -1;
	}
	if (backlog <= 0)
		backlog = 1024;
	if (!id->nic && !id->wildcard) {
		/* As the kernel's rdma_listen on an id not bound: the IPv4
		 * wildcard address, on a port of its choosing. */
		struct sockaddr_in any = {.sin_family = AF_INET};
		if (rdma_bind_addr(cid, (struct sockaddr *)&any))
			return -1;
	}
	if (id->wildcard)
		return listen_wildcard(id, backlog);
	struct hostif_msg m;
	if (CMD(id, OP_CM_LISTEN, m, hostif_u32(&m, (uint32_t)backlog)))
		return -1;
	id->listening = 1;
	return 0;
}

int rdma_get_request(struct rdma_cm_id *listen, struct rdma_cm_id **out)
{
	struct cma_id *l = (struct cma_id *)listen;
	struct cma_event *ev;
	if (!l->sync) {
		errno = EINVAL;
		return -1;
	}
	if (wait_for(l, RDMA_CM_EVENT_CONNECT_REQUEST, &ev))
		return -1;
	struct cma_id *id = (struct cma_id *)ev->ev.id;
	id->id.event = &ev->ev; /* the request's parameters, until the id is destroyed */
	if (l->qp_init) {
		struct ibv_qp_init_attr a = *l->qp_init;
		if (rdma_create_qp(&id->id, listen->pd, &a)) {
			int e = errno;
			rdma_reject(&id->id, NULL, 0);
			rdma_destroy_id(&id->id);
			errno = e;
			return -1;
		}
	}
	*out = &id->id;
	return 0;
}

int rdma_accept(struct rdma_cm_id *cid, struct rdma_conn_param *p)
{
	struct cma_id *id = (struct cma_id *)cid;
	if (!id->nic) {
		errno = EINVAL;
		return -1;
	}
	if (cid->qp && cid->qp_type != IBV_QPT_UD && ready_qp(id)) {
		int e = errno;
		rdma_reject(cid, NULL, 0);
		errno = e;
		return -1;
	}
	struct hostif_msg m;
	if (CMD(id, OP_CM_ACCEPT, m, put_param(&m, id, p, 1)))
		return -1;
	if (id->sync && cid->qp_type != IBV_QPT_UD)
		return wait_for(id, RDMA_CM_EVENT_ESTABLISHED, NULL);
	return 0;
}

int rdma_reject(struct rdma_cm_id *cid, const void *private_data, uint8_t len)
{
	struct cma_id *id = (struct cma_id *)cid;
	if (!id->nic) {
		errno = EINVAL;
		return -1;
	}
	struct hostif_msg m;
	return CMD(id, OP_CM_REJECT, m, hostif_u8(&m, 28); hostif_bytes(&m, private_data, private_data ? len : 0));
}

int rdma_reject_ece(struct rdma_cm_id *cid, const void *private_data, uint8_t len)
{
	return rdma_reject(cid, private_data, len);
}

int rdma_notify(struct rdma_cm_id *cid, enum ibv_event_type event)
{
	struct cma_id *id = (struct cma_id *)cid;
	if (!id->nic) {
		errno = EINVAL;
		return -1;
	}
	struct hostif_msg m;
	return CMD(id, OP_CM_NOTIFY, m, hostif_u32(&m, (uint32_t)event));
}

int rdma_disconnect(struct rdma_cm_id *cid)
{
	struct cma_id *id = (struct cma_id *)cid;
	if (!id->nic) {
		errno = EINVAL;
		return -1;
	}
	if (cid->qp && cid->qp_type != IBV_QPT_UD) {
		/* As librdmacm: the QP stops (its WRs flush) before the DREQ. */
		struct ibv_qp_attr a = {.qp_state = IBV_QPS_ERR};
		ibv_modify_qp(cid->qp, &a, IBV_QP_STATE);
	}
	struct hostif_msg m;
	if (CMD(id, OP_CM_DISCONNECT, m, (void)0))
		return -1;
	if (id->sync)
		return wait_for(id, RDMA_CM_EVENT_DISCONNECTED, NULL);
	return 0;
}

int rdma_destroy_id(struct rdma_cm_id *cid)
{
	struct cma_id *id = (struct cma_id *)cid;
	if (!cid) {
		errno = EINVAL;
		return -1;
	}
	for (int i = 0; i < id->nsubs; i++)
		rdma_destroy_id(&id->subs[i]->id);
	free(id->subs);
	if (id->nic) {
		struct hostif_msg m;
		CMD(id, OP_CM_DESTROY_ID, m, (void)0);
		ids_del(id);
	}
	/* Events of the id not yet taken go with it. */
	struct cma_channel *ch = id->chan;
	pthread_mutex_lock(&ch->lock);
	for (int i = 0; i < ch->nlocal;) {
		if (ch->local[i]->ev.id == cid) {
			free(ch->local[i]);
			memmove(ch->local + i, ch->local + i + 1, (--ch->nlocal - i) * sizeof *ch->local);
		} else {
			i++;
		}
	}
	pthread_mutex_unlock(&ch->lock);
	if (cid->event)
		free(cid->event);
	if (id->ownchan)
		rdma_destroy_event_channel(&id->chan->ch);
	free(id->qp_init);
	free(id);
	return 0;
}

/* --- endpoints (rdma_create_ep, rdma_getaddrinfo) --- */

int rdma_create_ep(struct rdma_cm_id **out, struct rdma_addrinfo *res, struct ibv_pd *pd, struct ibv_qp_init_attr *qp_init)
{
	if (!out || !res) {
		errno = EINVAL;
		return -1;
	}
	struct rdma_cm_id *cid;
	if (rdma_create_id(NULL, &cid, NULL, (enum rdma_port_space)res->ai_port_space))
		return -1;
	struct cma_id *id = (struct cma_id *)cid;
	int r;
	if (res->ai_flags & RAI_PASSIVE) {
		r = rdma_bind_addr(cid, res->ai_src_addr);
		if (!r && qp_init) {
			id->qp_init = malloc(sizeof *qp_init);
			if (id->qp_init)
				*id->qp_init = *qp_init;
			cid->pd = pd;
		}
	} else {
		r = rdma_resolve_addr(cid, res->ai_src_addr, res->ai_dst_addr, 2000);
		if (!r)
			r = rdma_resolve_route(cid, 2000);
		if (!r && qp_init)
			r = rdma_create_qp(cid, pd, qp_init);
	}
	if (r) {
		int e = errno;
		rdma_destroy_ep(cid);
		errno = e;
		return -1;
	}
	*out = cid;
	return 0;
}

void rdma_destroy_ep(struct rdma_cm_id *cid)
{
	if (cid->qp)
		rdma_destroy_qp(cid);
	if (cid->srq)
		rdma_destroy_srq(cid);
	rdma_destroy_id(cid);
}

static struct sockaddr *dup_sa(const struct sockaddr *sa, socklen_t *len)
{
	*len = sa_len(sa);
	struct sockaddr *c = malloc(*len);
	if (c)
		memcpy(c, sa, *len);
	return c;
}

/* rdma_getaddrinfo resolves node and service with getaddrinfo (the
 * first answer, as librdmacm takes it): passive (RAI_PASSIVE) into the
 * source address, else into the destination. Without node and service
 * the result is the hints' addresses. The source address of the hints
 * is kept when the answer has none. A name that does not resolve
 * returns getaddrinfo's EAI_ code, as librdmacm does (gai_strerror). */
int rdma_getaddrinfo(const char *node, const char *service, const struct rdma_addrinfo *hints, struct rdma_addrinfo **res)
{
	static const struct rdma_addrinfo nohints;
	if (!res || (!node && !service && !hints)) {
		errno = EINVAL;
		return -1;
	}
	if (!hints)
		hints = &nohints;
	if (hints->ai_family == AF_IB) { /* rnic is RoCE: no InfiniBand addresses */
		errno = EAFNOSUPPORT;
		return -1;
	}
	struct rdma_addrinfo *ai = calloc(1, sizeof *ai);
	if (!ai) {
		errno = ENOMEM;
		return -1;
	}
	if (node || service) {
		struct addrinfo h = {.ai_family = hints->ai_family}, *gai = NULL;
		if (hints->ai_flags & RAI_PASSIVE)
			h.ai_flags |= AI_PASSIVE;
		if (hints->ai_flags & RAI_NUMERICHOST)
			h.ai_flags |= AI_NUMERICHOST;
		switch (hints->ai_qp_type) {
		case IBV_QPT_RC:
		case IBV_QPT_UC:
			h.ai_socktype = SOCK_STREAM;
			break;
		case IBV_QPT_UD:
			h.ai_socktype = SOCK_DGRAM;
			break;
		default:
			break;
		}
		if (hints->ai_port_space == RDMA_PS_TCP)
			h.ai_protocol = IPPROTO_TCP;
		else if (hints->ai_port_space == RDMA_PS_UDP || hints->ai_port_space == RDMA_PS_IPOIB)
			h.ai_protocol = IPPROTO_UDP;
		int e = getaddrinfo(node, service, &h, &gai);
		if (e) {
			free(ai);
			return e;
		}
		ai->ai_qp_type = hints->ai_qp_type ? hints->ai_qp_type
			       : gai->ai_socktype == SOCK_DGRAM ? IBV_QPT_UD : IBV_QPT_RC;
		ai->ai_port_space = hints->ai_port_space ? hints->ai_port_space
				  : gai->ai_protocol == IPPROTO_UDP ? RDMA_PS_UDP : RDMA_PS_TCP;
		ai->ai_family = gai->ai_family;
		if (hints->ai_flags & RAI_PASSIVE) {
			ai->ai_flags = RAI_PASSIVE;
			ai->ai_src_addr = dup_sa(gai->ai_addr, &ai->ai_src_len);
		} else {
			ai->ai_dst_addr = dup_sa(gai->ai_addr, &ai->ai_dst_len);
		}
		freeaddrinfo(gai);
		if (!ai->ai_src_addr && !ai->ai_dst_addr) {
			free(ai);
			errno = ENOMEM;
			return -1;
		}
	} else {
		ai->ai_flags = hints->ai_flags;
		ai->ai_family = hints->ai_family;
		ai->ai_qp_type = hints->ai_qp_type;
		ai->ai_port_space = hints->ai_port_space;
		if (hints->ai_dst_len && hints->ai_dst_addr) {
			if (!(ai->ai_dst_addr = dup_sa(hints->ai_dst_addr, &ai->ai_dst_len))) {
				free(ai);
				errno = ENOMEM;
				return -1;
			}
		}
	}
	if (!ai->ai_src_len && hints->ai_src_len && hints->ai_src_addr) {
		if (!(ai->ai_src_addr = dup_sa(hints->ai_src_addr, &ai->ai_src_len))) {
			rdma_freeaddrinfo(ai);
			errno = ENOMEM;
			return -1;
		}
	}
	*res = ai;
	return 0;
}

void rdma_freeaddrinfo(struct rdma_addrinfo *res)
{
	while (res) {
		struct rdma_addrinfo *next = res->ai_next;
		free(res->ai_src_addr);
		free(res->ai_dst_addr);
		free(res->ai_src_canonname);
		free(res->ai_dst_canonname);
		free(res->ai_route);
		free(res->ai_connect);
		free(res);
		res = next;
	}
}

/* --- devices, ports, options --- */

struct ibv_context **rdma_get_devices(int *num)
{
	scan_nics();
	struct ibv_context **l = calloc(nnics + 1, sizeof *l);
	int n = 0;
	if (!l) {
		errno = ENOMEM;
		return NULL;
	}
	for (int i = 0; i < nnics; i++) {
		struct ibv_context *c = nic_verbs(&nics[i]);
		if (c)
			l[n++] = c;
	}
	if (num)
		*num = n;
	return l;
}

void rdma_free_devices(struct ibv_context **list) { free(list); }

__be16 rdma_get_src_port(struct rdma_cm_id *cid) { return htons(port_of(&cid->route.addr.src_addr)); }
__be16 rdma_get_dst_port(struct rdma_cm_id *cid) { return htons(port_of(&cid->route.addr.dst_addr)); }

/* set_id_option sets an RDMA_OPTION_ID option (opt, CM_OPT_*): the NIC
 * that holds the id, or each part of a wildcard id, applies it, refusing
 * it with EINVAL in a state the kernel refuses it in; an id on no NIC
 * yet keeps it for the NICs it goes to. */
static int set_id_option(struct cma_id *id, uint32_t opt, uint32_t v)
{
	if (id->nic) {
		if (send_option(id, opt, v))
			return -1;
	} else if (id->wildcard) {
		/* Bound, or listening, whether it has parts or not: the
		 * kernel takes AFONLY and REUSEADDR on in the first only, and
		 * REUSEADDR off in neither. */
		if ((opt == CM_OPT_AFONLY || opt == CM_OPT_REUSEADDR) && (id->listening || (opt == CM_OPT_REUSEADDR && !v))) {
			errno = EINVAL;
			return -1;
		}
		for (int i = 0; i < id->nsubs; i++)
			if (send_option(id->subs[i], opt, v))
				return -1;
	}
	switch (opt) {
	case CM_OPT_AFONLY:
		id->afonly = (int)v;
		id->afonly_set = 1;
		break;
	case CM_OPT_REUSEADDR:
		id->reuseaddr = (int)v;
		break;
	case CM_OPT_TOS:
		id->tos = (int)v + 1;
		break;
	case CM_OPT_ACK_TIMEOUT:
		id->ack_timeout = (int)v + 1;
		break;
	}
	return 0;
}

/* set_ib_path is RDMA_OPTION_IB_PATH: the route is the primary path of
 * the records given (rdma-core's struct ibv_path_data), as the kernel's
 * ucma_set_ib_path sets it instead of resolving one, for an id whose
 * address is resolved and its route not yet (the NIC refuses another:
 * EINVAL); ROUTE_RESOLVED follows. Over RoCE what a path decides is the
 * destination GID, MTU, hop limit, traffic class, flow label and packet
 * lifetime: the REQ carries them and the QP takes them. */
static int set_ib_path(struct cma_id *id, const void *optval, size_t optlen)
{
	const struct ibv_path_data *d = optval;
	size_t n = optlen / sizeof *d, i;
	if (optlen % sizeof *d) {
		errno = EINVAL;
		return -1;
	}
	for (i = 0; i < n; i++)
		if (d[i].flags == (IBV_PATH_FLAG_GMP | IBV_PATH_FLAG_PRIMARY | IBV_PATH_FLAG_BIDIRECTIONAL))
			break;
	if (i == n || !id->nic) { /* no primary path; no device yet */
		errno = EINVAL;
		return -1;
	}
	const struct ibv_path_record *p = &d[i].path;
	uint32_t fl = be32toh(p->flowlabel_hoplimit);
	struct hostif_msg m;
	if (CMD(id, OP_CM_SET_PATH, m, hostif_put(&m, p->dgid.raw, 16); hostif_u8(&m, p->mtu & 0x3f);
		hostif_u8(&m, (uint8_t)fl); hostif_u8(&m, p->tclass); hostif_u32(&m, (fl >> 8) & 0xfffff);
		hostif_u8(&m, p->packetlifetime & 0x3f)))
		return -1;
	/* The route as the program reads it (rdma_cm_id.route). */
	struct ibv_sa_path_rec *r = &id->path;
	memset(r, 0, sizeof *r);
	memcpy(r->dgid.raw, p->dgid.raw, 16);
	memcpy(r->sgid.raw, p->sgid.raw, 16);
	r->dlid = p->dlid;
	r->slid = p->slid;
	r->flow_label = htobe32((fl >> 8) & 0xfffff);
	r->hop_limit = (uint8_t)fl;
	r->traffic_class = p->tclass;
	r->reversible = p->reversible_numpath >> 7;
	r->numb_path = p->reversible_numpath & 0x7f;
	r->pkey = p->pkey;
	r->sl = be16toh(p->qosclass_sl) & 0xf;
	r->mtu_selector = p->mtu >> 6;
	r->mtu = p->mtu & 0x3f;
	r->rate_selector = p->rate >> 6;
	r->rate = p->rate & 0x3f;
	r->packet_life_time_selector = p->packetlifetime >> 6;
	r->packet_life_time = p->packetlifetime & 0x3f;
	r->preference = p->preference;
	id->id.route.path_rec = r;
	id->id.route.num_paths = 1;
	if (id->sync)
		return wait_for(id, RDMA_CM_EVENT_ROUTE_RESOLVED, NULL);
	return 0;
}

/* rdma_set_option: every option either takes effect as on Linux or is
 * refused with the errno the kernel (ucma_set_option) gives, which
 * checks the length first (EINVAL), then the state. */
int rdma_set_option(struct rdma_cm_id *cid, int level, int optname, void *optval, size_t optlen)
{
	struct cma_id *id = (struct cma_id *)cid;
	if (!cid) {
		errno = EINVAL;
		return -1;
	}
	if (!optval && optlen) {
		errno = EFAULT; /* the kernel cannot copy the value */
		return -1;
	}
	if (level == RDMA_OPTION_ID) {
		switch (optname) {
		case RDMA_OPTION_ID_TOS:
			/* The route's traffic class (RFC 2474's TOS byte): a
			 * route resolved from then on has it, as the kernel's. */
			if (optlen != sizeof(uint8_t)) {
				errno = EINVAL;
				return -1;
			}
			return set_id_option(id, CM_OPT_TOS, *(uint8_t *)optval);
		case RDMA_OPTION_ID_ACK_TIMEOUT:
			/* The QP's local ACK timeout (rdma_init_qp_attr), and a
			 * route resolved from then on has the packet lifetime it
			 * implies. RC ids only, any value (the QP's modify judges
			 * it), as the kernel's rdma_set_ack_timeout. */
			if (optlen != sizeof(uint8_t) || cid->qp_type != IBV_QPT_RC) {
				errno = EINVAL;
				return -1;
			}
			return set_id_option(id, CM_OPT_ACK_TIMEOUT, *(uint8_t *)optval);
		case RDMA_OPTION_ID_REUSEADDR:
		case RDMA_OPTION_ID_AFONLY:
			/* Which ids may share a port and which requests a
			 * listener takes: the NICs' (cm/ports.go). */
			if (optlen != sizeof(int)) {
				errno = EINVAL;
				return -1;
			}
			return set_id_option(id, optname == RDMA_OPTION_ID_AFONLY ? CM_OPT_AFONLY : CM_OPT_REUSEADDR,
					     *(int *)optval != 0);
		}
	} else if (level == RDMA_OPTION_IB && optname == RDMA_OPTION_IB_PATH) {
		return set_ib_path(id, optval, optlen);
	}
	errno = ENOSYS; /* as the kernel answers a level or option it does not know */
	return -1;
}

/* migrate_one sends the NIC-side id x's events to channel nc. */
static int migrate_one(struct cma_id *x, struct cma_channel *nc)
{
	uint32_t token;
	struct hostif_msg m;
	if (chan_token(nc, x->nic, &token))
		return -1;
	return CMD(x, OP_CM_MIGRATE, m, hostif_u32(&m, token));
}

/* rdma_migrate_id moves the id's events to channel (NULL: a channel of
 * its own, and the id is synchronous from then on): its events not yet
 * taken move too. As librdmacm, the program has no event of the id
 * outstanding (unacked) when it calls this. */
int rdma_migrate_id(struct rdma_cm_id *cid, struct rdma_event_channel *channel)
{
	struct cma_id *id = (struct cma_id *)cid;
	if (!cid) {
		errno = EINVAL;
		return -1;
	}
	int own = !channel;
	if (own && !(channel = rdma_create_event_channel()))
		return -1;
	struct cma_channel *nc = (struct cma_channel *)channel, *old = id->chan;
	if (nc == old)
		return 0;
	int r = 0;
	if (id->nic)
		r = migrate_one(id, nc);
	for (int i = 0; !r && i < id->nsubs; i++)
		r = migrate_one(id->subs[i], nc);
	if (r) {
		int e = errno;
		if (own)
			rdma_destroy_event_channel(channel);
		errno = e;
		return -1;
	}
	for (int i = 0; i < id->nsubs; i++) {
		id->subs[i]->chan = nc;
		id->subs[i]->id.channel = channel;
	}
	/* Its events the library holds on the old channel go along. */
	for (;;) {
		struct cma_event *ev = NULL;
		pthread_mutex_lock(&old->lock);
		for (int i = 0; i < old->nlocal; i++)
			if (old->local[i]->ev.id == cid) {
				ev = old->local[i];
				memmove(old->local + i, old->local + i + 1, (--old->nlocal - i) * sizeof *old->local);
				break;
			}
		pthread_mutex_unlock(&old->lock);
		if (!ev)
			break;
		push_local(nc, ev, 0);
	}
	id->chan = nc;
	cid->channel = channel;
	if (id->ownchan)
		rdma_destroy_event_channel(&old->ch);
	id->sync = id->ownchan = own;
	return 0;
}

/* Multicast is out of rnic's scope (no multicast on its links). */
int rdma_join_multicast(struct rdma_cm_id *cid, struct sockaddr *addr, void *context)
{
	(void)cid, (void)addr, (void)context;
	errno = ENOSYS;
	return -1;
}

int rdma_join_multicast_ex(struct rdma_cm_id *cid, struct rdma_cm_join_mc_attr_ex *attr, void *context)
{
	(void)cid, (void)attr, (void)context;
	errno = ENOSYS;
	return -1;
}

int rdma_leave_multicast(struct rdma_cm_id *cid, struct sockaddr *addr)
{
	(void)cid, (void)addr;
	errno = ENOSYS;
	return -1;
}

/* Enhanced connection establishment (vendor options in REQ/REP): rnic
 * has none; the peer's is none. */
int rdma_set_local_ece(struct rdma_cm_id *cid, struct ibv_ece *ece)
{
	(void)cid, (void)ece;
	errno = EOPNOTSUPP;
	return -1;
}

int rdma_get_remote_ece(struct rdma_cm_id *cid, struct ibv_ece *ece)
{
	(void)cid;
	if (ece)
		memset(ece, 0, sizeof *ece);
	return 0;
}
