/*
 * Opening a device and asking it what it is: ibv_open_device connects to
 * the NIC's socket and says hello (the NIC hands out the doorbell page
 * and its wake-up eventfd), ibv_query_device/port/gid ask over the host
 * interface. The context is a struct verbs_context, so that the inline
 * verbs of <infiniband/verbs.h> compiled into programs find their
 * extended operations.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stddef.h>
#include <endian.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "hostif.h"
#include "rnic.h"
#include "sysview.h"

int rnic_call(struct ibv_context *c, struct hostif_msg *m, uint16_t op, int *fds, int *nfds)
{
	struct rnic_context *ctx = to_ctx(c);
	pthread_mutex_lock(&ctx->lock);
	/* The header's sequence number, set here: requests on one socket are
	 * one at a time. */
	uint32_t seq = ++ctx->seq;
	for (int i = 0; i < 4; i++)
		m->b[4 + i] = seq >> (8 * i);
	m->b[2] = op;
	m->b[3] = op >> 8;
	int r = hostif_call(ctx->fd, m, fds, nfds);
	pthread_mutex_unlock(&ctx->lock);
	if (r < 0)
		return errno ? errno : EIO;
	return r;
}

static int rnic_query_port(struct ibv_context *c, uint8_t port, struct ibv_port_attr *attr, size_t len);

/*
 * The NIC reaches the program's registered memory with process_vm_readv
 * and process_vm_writev, which the kernel allows a process of the same
 * user unless the program is not dumpable or Yama forbids it. With
 * Yama's ptrace_scope 1 (Ubuntu's default) only a process the program
 * names with prctl(PR_SET_PTRACER) may, and a program names one: the
 * first NIC it opens, the process at the other end of the socket
 * (SO_PEERCRED, which the kernel vouches for). NICs that run in one
 * process (rnic nic up --addr A --addr B) are one ptracer; a NIC in
 * another process cannot be let in as well, and its HELLO says so.
 */
static pthread_mutex_t ptracer_lock = PTHREAD_MUTEX_INITIALIZER;
static pid_t ptracer;	 /* the NIC process named */
static pid_t ptracer_of; /* by this process (a forked child names its own) */

static int yama_scope(void)
{
	FILE *f = fopen("/proc/sys/kernel/yama/ptrace_scope", "re");
	int scope = -1;
	if (f) {
		if (fscanf(f, "%d", &scope) != 1)
			scope = -1;
		fclose(f);
	}
	return scope;
}

static void let_nic_in(int fd)
{
	struct ucred cr;
	socklen_t len = sizeof cr;
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) || yama_scope() != 1)
		return;
	pthread_mutex_lock(&ptracer_lock);
	if (ptracer_of != getpid() && prctl(PR_SET_PTRACER, (unsigned long)cr.pid, 0, 0, 0) == 0) {
		ptracer = cr.pid;
		ptracer_of = getpid();
	}
	pthread_mutex_unlock(&ptracer_lock);
}

/* rnic_no_access says, on stderr, why the NIC of context c may not reach
 * this program's memory (its HELLO said EACCES; ibv_reg_mr fails so). */
void rnic_no_access(struct ibv_context *c)
{
	struct rnic_context *ctx = to_ctx(c);
	const char *name = c->device->name;
	struct ucred cr = {0};
	socklen_t len = sizeof cr;
	getsockopt(ctx->fd, SOL_SOCKET, SO_PEERCRED, &cr, &len);
	int scope = yama_scope();
	char why[256];
	if (prctl(PR_GET_DUMPABLE, 0, 0, 0, 0) == 0)
		snprintf(why, sizeof why, "this program is not dumpable (set-user-ID, or prctl(PR_SET_DUMPABLE, 0))");
	else if (scope >= 2)
		snprintf(why, sizeof why, "Yama's ptrace_scope is %d: only a NIC with CAP_SYS_PTRACE may (or set kernel.yama.ptrace_scope to 1)", scope);
	else if (scope == 1 && ptracer_of == getpid() && ptracer != cr.pid)
		snprintf(why, sizeof why,
			 "Yama's ptrace_scope is 1 and this program let in the NIC of pid %d, one process only: "
			 "run the NICs it uses in one process (rnic nic up --addr A --addr B)", (int)ptracer);
	else if (scope == 1)
		snprintf(why, sizeof why, "Yama's ptrace_scope is 1 and prctl(PR_SET_PTRACER, %d) did not let the NIC in", (int)cr.pid);
	else if (cr.uid != getuid())
		snprintf(why, sizeof why, "the NIC runs as uid %d, this program as uid %d", (int)cr.uid, (int)getuid());
	else
		snprintf(why, sizeof why, "the kernel refused it (a Linux security module?)");
	fprintf(stderr, "rnic: %s (pid %d) may not reach this program's memory: %s\n", name, (int)cr.pid, why);
}

struct ibv_context *ibv_open_device(struct ibv_device *device)
{
	struct rnic_device *dev = (struct rnic_device *)device;
	struct rnic_context *ctx = calloc(1, sizeof *ctx);
	if (!ctx) {
		errno = ENOMEM;
		return NULL;
	}
	ctx->fd = hostif_connect(dev->socket);
	if (ctx->fd < 0) {
		int e = errno;
		free(ctx);
		errno = e == ENOENT || e == ECONNREFUSED ? ENODEV : e;
		return NULL;
	}
	pthread_mutex_init(&ctx->lock, NULL);
	pthread_mutex_init(&ctx->ev_lock, NULL);
	let_nic_in(ctx->fd);
	struct hostif_msg m;
	int fds[3], nfds = 3;
	hostif_begin(&m, HOSTIF_HELLO, 0);
	hostif_hello_args(&m);
	int r = hostif_call(ctx->fd, &m, fds, &nfds);
	if (r == 0) {
		/* version, name, and whether the NIC may reach this program's
		 * memory: queries need not, registering memory does. */
		hostif_get_u32(&m);
		hostif_get(&m, hostif_get_u16(&m));
		ctx->access = (int)hostif_get_u32(&m);
		if (m.err)
			r = EPROTO;
	}
	if (r != 0 || nfds != 3) {
		for (int i = 0; i < nfds; i++)
			close(fds[i]);
		close(ctx->fd);
		free(ctx);
		errno = r > 0 ? r : EPROTO;
		return NULL;
	}
	ctx->db = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fds[0], 0);
	close(fds[0]);
	ctx->wake_fd = fds[1];
	if (ctx->db == MAP_FAILED) {
		close(fds[2]);
		close(ctx->wake_fd);
		close(ctx->fd);
		free(ctx);
		errno = ENOMEM;
		return NULL;
	}
	struct ibv_context *c = &ctx->vctx.context;
	rnic_device_get(device); /* the context holds it past ibv_free_device_list */
	c->device = device;
	c->cmd_fd = ctx->fd;
	c->async_fd = fds[2];
	c->num_comp_vectors = 1;
	pthread_mutex_init(&c->mutex, NULL);
	c->abi_compat = __VERBS_ABI_IS_EXTENDED;
	c->ops.alloc_mw = rnic_alloc_mw;
	c->ops.dealloc_mw = rnic_dealloc_mw;
	c->ops.bind_mw = rnic_bind_mw;
	c->ops.post_send = rnic_post_send;
	ctx->vctx.sz = sizeof ctx->vctx;
	ctx->vctx.query_port = rnic_query_port;
	ctx->vctx.create_qp_ex = rnic_create_qp_ex;
	ctx->vctx.create_cq_ex = rnic_create_cq_ex;
	ctx->vctx.query_device_ex = rnic_query_device_ex;
	ctx->vctx.advise_mr = rnic_advise_mr;
	return c;
}

int ibv_close_device(struct ibv_context *c)
{
	struct rnic_context *ctx = to_ctx(c);
	munmap(ctx->db, 4096);
	close(ctx->wake_fd);
	close(c->async_fd);
	pthread_mutex_destroy(&ctx->ev_lock);
	close(ctx->fd); /* the NIC tears down what the program left */
	pthread_mutex_destroy(&ctx->lock);
	rnic_device_put(c->device);
	free(ctx);
	return 0;
}

/* The node GUID: the EUI-64 of the link-local GID (index 0). */
static __be64 node_guid(struct ibv_context *c)
{
	union ibv_gid g;
	__be64 guid = 0;
	if (ibv_query_gid(c, 1, 0, &g) == 0)
		memcpy(&guid, g.raw + 8, 8);
	return guid;
}

int ibv_query_device(struct ibv_context *c, struct ibv_device_attr *a)
{
	struct hostif_msg m;
	hostif_begin(&m, HOSTIF_QUERY_DEVICE, 0);
	int r = rnic_call(c, &m, HOSTIF_QUERY_DEVICE, NULL, NULL);
	if (r)
		return r;
	memset(a, 0, sizeof *a);
	a->max_mr_size = hostif_get_u64(&m);
	a->page_size_cap = hostif_get_u64(&m);
	a->max_qp = hostif_get_u32(&m);
	a->max_qp_wr = hostif_get_u32(&m);
	a->max_sge = hostif_get_u32(&m);
	a->max_cq = hostif_get_u32(&m);
	a->max_cqe = hostif_get_u32(&m);
	a->max_mr = hostif_get_u32(&m);
	a->max_pd = hostif_get_u32(&m);
	a->max_qp_rd_atom = hostif_get_u32(&m);
	a->max_qp_init_rd_atom = hostif_get_u32(&m);
	a->max_srq = hostif_get_u32(&m);
	a->max_srq_wr = hostif_get_u32(&m);
	a->max_srq_sge = hostif_get_u32(&m);
	hostif_get_u32(&m); /* max inline data: a QP capability, not in ibv_device_attr */
	a->atomic_cap = hostif_get_u8(&m);
	uint16_t n = hostif_get_u16(&m);
	const uint8_t *fw = hostif_get(&m, n);
	if (m.err)
		return EPROTO;
	memcpy(a->fw_ver, fw, n < sizeof a->fw_ver ? n : sizeof a->fw_ver - 1);
	a->node_guid = a->sys_image_guid = node_guid(c);
	a->vendor_id = 0xffffff; /* no IEEE OUI: rxe's choice too */
	a->max_sge_rd = a->max_sge;
	a->max_res_rd_atom = a->max_qp_rd_atom * a->max_qp;
	a->max_mw = a->max_mr; /* windows and regions share the MPT */
	a->max_ah = RNIC_MAX_AH; /* the NIC's AH table */
	a->max_pkeys = 1;
	a->local_ca_ack_delay = 15;
	a->phys_port_cnt = 1;
	a->device_cap_flags = IBV_DEVICE_RC_RNR_NAK_GEN | IBV_DEVICE_MEM_WINDOW | IBV_DEVICE_MEM_WINDOW_TYPE_2B |
			      IBV_DEVICE_SYS_IMAGE_GUID;
	return 0;
}

/* ibv_query_device_ex: the device's attributes and what the extended
 * structure adds; rnic has none of ODP, TSO, RSS, tag matching, packet
 * pacing or device memory, so those stay zero. */
int rnic_query_device_ex(struct ibv_context *c, const struct ibv_query_device_ex_input *input, struct ibv_device_attr_ex *attr,
			 size_t size)
{
	if (input && input->comp_mask)
		return EINVAL;
	if (size < offsetof(struct ibv_device_attr_ex, comp_mask) + sizeof attr->comp_mask)
		return EINVAL;
	struct ibv_device_attr_ex a;
	memset(&a, 0, sizeof a);
	int r = ibv_query_device(c, &a.orig_attr);
	if (r)
		return r;
	a.phys_port_cnt_ex = a.orig_attr.phys_port_cnt;
	/* The kernel's IB_UVERBS_DEVICE_FLUSH_GLOBAL and _ATOMIC_WRITE bits
	 * (rdma-core names none): rnic takes FLUSH to global visibility, not
	 * to persistence, and ATOMIC WRITE. */
	a.device_cap_flags_ex = a.orig_attr.device_cap_flags | 1ULL << 38 | 1ULL << 40;
	a.max_dm_size = 0;
	/* On-demand paging: the NIC pins nothing and reaches a region's pages
	 * through the kernel (process_vm_readv/writev), which faults them in
	 * as it goes, so every region is on demand and IBV_ACCESS_ON_DEMAND
	 * changes nothing. Implicit ODP too: ibv_reg_mr(pd, NULL, SIZE_MAX,
	 * IBV_ACCESS_ON_DEMAND) registers the program's whole address space,
	 * each address its own IOVA (the NIC's ATU keeps no MTT entries for
	 * it). */
	a.odp_caps.general_caps = IBV_ODP_SUPPORT | IBV_ODP_SUPPORT_IMPLICIT;
	a.odp_caps.per_transport_caps.rc_odp_caps = IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV | IBV_ODP_SUPPORT_WRITE |
						    IBV_ODP_SUPPORT_READ | IBV_ODP_SUPPORT_ATOMIC | IBV_ODP_SUPPORT_SRQ_RECV;
	a.odp_caps.per_transport_caps.uc_odp_caps = IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV | IBV_ODP_SUPPORT_WRITE |
						    IBV_ODP_SUPPORT_SRQ_RECV;
	a.odp_caps.per_transport_caps.ud_odp_caps = IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV | IBV_ODP_SUPPORT_SRQ_RECV;
	memcpy(attr, &a, size < sizeof a ? size : sizeof a);
	return 0;
}

static int rnic_query_port(struct ibv_context *c, uint8_t port, struct ibv_port_attr *attr, size_t len)
{
	if (port != 1)
		return EINVAL;
	struct hostif_msg m;
	hostif_begin(&m, HOSTIF_QUERY_PORT, 0);
	hostif_u8(&m, port);
	int r = rnic_call(c, &m, HOSTIF_QUERY_PORT, NULL, NULL);
	if (r)
		return r;
	struct ibv_port_attr a = {0};
	a.active_mtu = hostif_get_u8(&m);
	uint64_t msg = hostif_get_u64(&m);
	a.gid_tbl_len = hostif_get_u32(&m);
	a.active_speed = hostif_get_u8(&m); /* the netdev's speed, mapped as rxe maps it */
	a.active_width = hostif_get_u8(&m);
	if (m.err)
		return EPROTO;
	a.state = IBV_PORT_ACTIVE;
	a.max_mtu = IBV_MTU_4096;
	a.max_msg_sz = msg > UINT32_MAX ? UINT32_MAX : (uint32_t)msg;
	a.port_cap_flags = IBV_PORT_IP_BASED_GIDS;
	a.pkey_tbl_len = 1;
	a.max_vl_num = 1;
	a.phys_state = 5; /* LinkUp */
	a.link_layer = IBV_LINK_LAYER_ETHERNET;
	memcpy(attr, &a, len < sizeof a ? len : sizeof a);
	return 0;
}

/* The exported ibv_query_port, for programs built before the extended
 * context: its struct is a prefix of ibv_port_attr. */
#undef ibv_query_port
int ibv_query_port(struct ibv_context *c, uint8_t port, struct _compat_ibv_port_attr *attr)
{
	/* The old struct ended before flags and port_cap_flags2. */
	return rnic_query_port(c, port, (struct ibv_port_attr *)attr, offsetof(struct ibv_port_attr, flags));
}

static int query_gid(struct ibv_context *c, uint8_t port, int index, uint8_t *gid, uint32_t *type)
{
	if (index < 0)
		return EINVAL;
	struct hostif_msg m;
	hostif_begin(&m, HOSTIF_QUERY_GID, 0);
	hostif_u8(&m, port);
	hostif_u32(&m, (uint32_t)index);
	int r = rnic_call(c, &m, HOSTIF_QUERY_GID, NULL, NULL);
	if (r)
		return r;
	const uint8_t *g = hostif_get(&m, 16);
	uint32_t t = hostif_get_u32(&m);
	if (m.err)
		return EPROTO;
	memcpy(gid, g, 16);
	if (type)
		*type = t;
	return 0;
}

int ibv_query_gid(struct ibv_context *c, uint8_t port, int index, union ibv_gid *gid)
{
	int r = query_gid(c, port, index, gid->raw, NULL);
	if (r) {
		errno = r;
		return -1;
	}
	return 0;
}

/* ibv_query_gid_type (rdma-core's private symbol ibv_devinfo imports):
 * the sysfs GID type, 0 for IB/RoCE v1, 1 for RoCE v2. */
int ibv_query_gid_type(struct ibv_context *c, uint8_t port, unsigned int index, int *type)
{
	uint8_t g[16];
	uint32_t t;
	int r = query_gid(c, port, (int)index, g, &t);
	if (r) {
		errno = r;
		return -1;
	}
	*type = t == IBV_GID_TYPE_ROCE_V2 ? 1 : 0;
	return 0;
}

/* ibv_read_sysfs_file reads dir/file without its newline, as
 * libibverbs does: the length read, or -1 with errno. A path of the
 * kernel's RDMA trees is read from the NICs' sysfs view (sysview.h). */
int ibv_read_sysfs_file(const char *dir, const char *file, char *buf, size_t size)
{
	char path[PATH_MAX], root[PATH_MAX], mapped[PATH_MAX];
	if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, file) >= sizeof path) {
		errno = ENAMETOOLONG;
		return -1;
	}
	sysview_root(root, sizeof root);
	int fd = open(sysview_map(root, path, mapped, sizeof mapped) ? mapped : path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t len = read(fd, buf, size);
	int e = errno;
	close(fd);
	errno = e;
	if (len > 0) {
		if (buf[len - 1] == '\n')
			buf[--len] = 0;
		else if ((size_t)len < size)
			buf[len] = 0;
		else /* no room for the terminating NUL: fail now, as libibverbs does */
			return -1;
	}
	return (int)len;
}

/* The start of rdma-core 44's struct verbs_sysfs_dev (driver.h, not
 * installed; its layout is part of IBVERBS_PRIVATE_34): a device as the
 * library found it in sysfs, which it hands its providers. */
struct sysfs_dev_34 {
	void *entry_next, *entry_prev;
	void *provider_data;
	const void *match;
	unsigned int flags;
	char sysfs_name[IBV_SYSFS_NAME_MAX];
	dev_t sysfs_cdev;
	char ibdev_name[IBV_SYSFS_NAME_MAX];
	char ibdev_path[IBV_SYSFS_PATH_MAX];
};

/* ibv_read_ibdev_sysfs_file (private, for providers): a file of the
 * device's sysfs directory, the name made from fnfmt. rnic loads no
 * provider that has such a device, but a provider library that calls it
 * reads the view like ibv_read_sysfs_file. */
int ibv_read_ibdev_sysfs_file(char *buf, size_t size, struct sysfs_dev_34 *dev, const char *fnfmt, ...)
	__attribute__((format(printf, 4, 5)));
int ibv_read_ibdev_sysfs_file(char *buf, size_t size, struct sysfs_dev_34 *dev, const char *fnfmt, ...)
{
	if (!dev) {
		errno = EINVAL;
		return -1;
	}
	char file[PATH_MAX];
	va_list ap;
	va_start(ap, fnfmt);
	int n = vsnprintf(file, sizeof file, fnfmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sizeof file) {
		errno = ENAMETOOLONG;
		return -1;
	}
	return ibv_read_sysfs_file(dev->ibdev_path, file, buf, size);
}

/* ibv_get_sysfs_path: where sysfs is mounted ($SYSFS_PATH without its
 * trailing slashes, else /sys), the root the device paths (ibdev_path,
 * dev_path) are under. */
static char sysfs_path[PATH_MAX];
static pthread_once_t sysfs_once = PTHREAD_ONCE_INIT;

static void find_sysfs(void)
{
	const char *e = getenv("SYSFS_PATH");
	snprintf(sysfs_path, sizeof sysfs_path, "%s", e && *e ? e : "/sys");
	for (size_t n = strlen(sysfs_path); n > 1 && sysfs_path[n - 1] == '/'; n--)
		sysfs_path[n - 1] = 0;
}

const char *ibv_get_sysfs_path(void)
{
	pthread_once(&sysfs_once, find_sysfs);
	return sysfs_path;
}

/* The P_Key table: the default P_Key only. */
int ibv_query_pkey(struct ibv_context *c, uint8_t port, int index, __be16 *pkey)
{
	(void)c;
	if (port != 1 || index != 0)
		return EINVAL;
	*pkey = htobe16(0xffff);
	return 0;
}

int ibv_get_pkey_index(struct ibv_context *c, uint8_t port, __be16 pkey)
{
	(void)c;
	return port == 1 && (be16toh(pkey) & 0x7fff) == 0x7fff ? 0 : -1;
}

int ibv_get_device_index(struct ibv_device *device)
{
	(void)device;
	return -1; /* no kernel device index */
}

static int zero_gid(const uint8_t *g)
{
	for (int i = 0; i < 16; i++)
		if (g[i])
			return 0;
	return 1;
}

int _ibv_query_gid_ex(struct ibv_context *c, uint32_t port, uint32_t index, struct ibv_gid_entry *entry, uint32_t flags,
		      size_t entry_size)
{
	if (flags || port != 1 || entry_size < sizeof *entry || index > INT_MAX)
		return EINVAL;
	uint32_t type;
	uint8_t g[16];
	int r = query_gid(c, (uint8_t)port, (int)index, g, &type);
	if (r)
		return r;
	if (zero_gid(g))
		return ENODATA; /* an empty entry of the table */
	memcpy(entry->gid.raw, g, 16);
	entry->gid_index = index;
	entry->port_num = port;
	entry->gid_type = type;
	entry->ndev_ifindex = 0; /* no net device: rnic's link is a UDP socket */
	return 0;
}

/* _ibv_query_gid_table: the valid entries of the port's table. */
ssize_t _ibv_query_gid_table(struct ibv_context *c, struct ibv_gid_entry *entries, size_t max_entries, uint32_t flags,
			     size_t entry_size)
{
	if (flags || entry_size < sizeof *entries)
		return -EINVAL;
	struct ibv_port_attr pa;
	int r = rnic_query_port(c, 1, &pa, sizeof pa);
	if (r)
		return -r;
	size_t n = 0;
	for (int i = 0; i < pa.gid_tbl_len; i++) {
		struct ibv_gid_entry e;
		r = _ibv_query_gid_ex(c, 1, (uint32_t)i, &e, 0, sizeof e);
		if (r == ENODATA)
			continue;
		if (r)
			return -r;
		if (n == max_entries)
			return -EINVAL; /* more entries than room, as rdma-core says */
		memcpy((uint8_t *)entries + n * entry_size, &e, sizeof e);
		n++;
	}
	return (ssize_t)n;
}

/* --- Async events --- */

/* What an async event concerns (struct ibv_async_event's element). */
enum event_object { EV_PORT, EV_QP, EV_CQ, EV_SRQ };

static enum event_object event_object(uint32_t type)
{
	switch (type) {
	case IBV_EVENT_CQ_ERR:
		return EV_CQ;
	case IBV_EVENT_SRQ_ERR:
	case IBV_EVENT_SRQ_LIMIT_REACHED:
		return EV_SRQ;
	case IBV_EVENT_QP_FATAL:
	case IBV_EVENT_QP_REQ_ERR:
	case IBV_EVENT_QP_ACCESS_ERR:
	case IBV_EVENT_COMM_EST:
	case IBV_EVENT_SQ_DRAINED:
	case IBV_EVENT_PATH_MIG:
	case IBV_EVENT_PATH_MIG_ERR:
	case IBV_EVENT_QP_LAST_WQE_REACHED:
		return EV_QP;
	}
	return EV_PORT; /* the device's and port's events */
}

/* ibv_get_async_event reads the next event the NIC sent on the context's
 * async socket; the socket closing is the device's fatal error, reported
 * once. */
int ibv_get_async_event(struct ibv_context *c, struct ibv_async_event *ev)
{
	struct rnic_context *ctx = to_ctx(c);
	uint8_t b[HOSTIF_ASYNC_EVENT_LEN];
	ssize_t n;
again:
	do
		n = read(c->async_fd, b, sizeof b);
	while (n < 0 && errno == EINTR);
	if (n == 0 && !ctx->fatal_sent) {
		ctx->fatal_sent = 1;
		memset(ev, 0, sizeof *ev);
		ev->element.port_num = 1;
		ev->event_type = IBV_EVENT_DEVICE_FATAL;
		return 0;
	}
	if (n != sizeof b) {
		if (n >= 0)
			errno = EIO;
		return -1;
	}
	uint32_t type = rd32(b), handle = rd32(b + 4);
	void *obj = (void *)(uintptr_t)rd64(b + 8);
	if (event_object(type) != EV_PORT) {
		/* An object's event: counted on it if it still lives. */
		struct rnic_evobj *e;
		pthread_mutex_lock(&ctx->ev_lock);
		for (e = ctx->evobjs; e && !(e->obj == obj && e->handle == handle); e = e->next)
			;
		if (e)
			e->reported++;
		pthread_mutex_unlock(&ctx->ev_lock);
		if (!e)
			goto again; /* destroyed since the NIC sent it */
	}
	memset(ev, 0, sizeof *ev);
	ev->event_type = type;
	switch (event_object(type)) {
	case EV_CQ:
		ev->element.cq = obj;
		break;
	case EV_SRQ:
		ev->element.srq = obj;
		break;
	case EV_QP:
		ev->element.qp = obj;
		break;
	case EV_PORT:
		ev->element.port_num = 1;
	}
	return 0;
}

/* ibv_ack_async_event counts the event on its object, which a destroy
 * waits for. */
void ibv_ack_async_event(struct ibv_async_event *ev)
{
	pthread_mutex_t *mu = NULL;
	pthread_cond_t *cond = NULL;
	uint32_t *n = NULL;
	switch (event_object(ev->event_type)) {
	case EV_CQ:
		mu = &ev->element.cq->mutex, cond = &ev->element.cq->cond, n = &ev->element.cq->async_events_completed;
		break;
	case EV_SRQ:
		mu = &ev->element.srq->mutex, cond = &ev->element.srq->cond, n = &ev->element.srq->events_completed;
		break;
	case EV_QP:
		mu = &ev->element.qp->mutex, cond = &ev->element.qp->cond, n = &ev->element.qp->events_completed;
		break;
	case EV_PORT:
		return;
	}
	pthread_mutex_lock(mu);
	(*n)++;
	pthread_cond_signal(cond);
	pthread_mutex_unlock(mu);
}
