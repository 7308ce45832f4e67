#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "hostif.h"

static void put(struct hostif_msg *m, const void *p, size_t n)
{
	if (m->len + n > sizeof m->b) {
		m->err = 1;
		return;
	}
	memcpy(m->b + m->len, p, n);
	m->len += n;
}

static void le16(uint8_t *b, uint16_t v) { b[0] = v; b[1] = v >> 8; }
static void le32(uint8_t *b, uint32_t v) { for (int i = 0; i < 4; i++) b[i] = v >> (8 * i); }
static uint16_t rd16(const uint8_t *b) { return b[0] | b[1] << 8; }
static uint32_t rd32(const uint8_t *b) { return b[0] | b[1] << 8 | b[2] << 16 | (uint32_t)b[3] << 24; }

void hostif_begin(struct hostif_msg *m, uint16_t op, uint32_t seq)
{
	memset(m->b, 0, HOSTIF_HEADER);
	le16(m->b, HOSTIF_MAGIC);
	le16(m->b + 2, op);
	le32(m->b + 4, seq);
	m->len = HOSTIF_HEADER;
	m->off = HOSTIF_HEADER;
	m->err = 0;
}

void hostif_u8(struct hostif_msg *m, uint8_t v) { put(m, &v, 1); }

void hostif_u16(struct hostif_msg *m, uint16_t v)
{
	uint8_t b[2];
	le16(b, v);
	put(m, b, 2);
}

void hostif_put(struct hostif_msg *m, const void *p, size_t n) { put(m, p, n); }

void hostif_bytes(struct hostif_msg *m, const void *p, size_t n)
{
	hostif_u16(m, (uint16_t)n);
	if (n > 0xffff)
		m->err = 1;
	else
		put(m, p, n);
}

void hostif_u32(struct hostif_msg *m, uint32_t v)
{
	uint8_t b[4];
	le32(b, v);
	put(m, b, 4);
}

void hostif_u64(struct hostif_msg *m, uint64_t v)
{
	uint8_t b[8];
	le32(b, (uint32_t)v);
	le32(b + 4, (uint32_t)(v >> 32));
	put(m, b, 8);
}

const uint8_t *hostif_get(struct hostif_msg *m, size_t n)
{
	if (m->err || m->off + n > m->len) {
		m->err = 1;
		return NULL;
	}
	const uint8_t *p = m->b + m->off;
	m->off += n;
	return p;
}

uint8_t hostif_get_u8(struct hostif_msg *m)
{
	const uint8_t *p = hostif_get(m, 1);
	return p ? p[0] : 0;
}

uint16_t hostif_get_u16(struct hostif_msg *m)
{
	const uint8_t *p = hostif_get(m, 2);
	return p ? rd16(p) : 0;
}

uint32_t hostif_get_u32(struct hostif_msg *m)
{
	const uint8_t *p = hostif_get(m, 4);
	return p ? rd32(p) : 0;
}

uint64_t hostif_get_u64(struct hostif_msg *m)
{
	const uint8_t *p = hostif_get(m, 8);
	return p ? rd32(p) | (uint64_t)rd32(p + 4) << 32 : 0;
}

int hostif_connect(const char *path)
{
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	if (strlen(path) >= sizeof a.sun_path) {
		errno = ENAMETOOLONG;
		return -1;
	}
	strcpy(a.sun_path, path);
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	if (connect(fd, (struct sockaddr *)&a, sizeof a) < 0) {
		int e = errno;
		close(fd);
		errno = e;
		return -1;
	}
	return fd;
}

int hostif_call(int fd, struct hostif_msg *m, int *fds, int *nfds)
{
	if (m->err) {
		errno = EMSGSIZE;
		return -1;
	}
	uint32_t seq = rd32(m->b + 4);
	uint16_t op = rd16(m->b + 2);
	le32(m->b + 12, (uint32_t)(m->len - HOSTIF_HEADER));
	ssize_t n;
	do
		n = send(fd, m->b, m->len, MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -1;
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(8 * sizeof(int))];
	} ctl;
	struct iovec iov = {.iov_base = m->b, .iov_len = sizeof m->b};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf, .msg_controllen = sizeof ctl.buf};
	do
		n = recvmsg(fd, &mh, MSG_CMSG_CLOEXEC);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -1;
	int got = 0;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		int k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		int *p = (int *)CMSG_DATA(c);
		for (int i = 0; i < k; i++) {
			if (fds && nfds && got < *nfds)
				fds[got++] = p[i];
			else
				close(p[i]);
		}
	}
	if (nfds)
		*nfds = got;
	if (n < HOSTIF_HEADER || rd16(m->b) != HOSTIF_MAGIC || rd16(m->b + 2) != op || rd32(m->b + 4) != seq ||
	    rd32(m->b + 12) != (uint32_t)(n - HOSTIF_HEADER)) {
		errno = EPROTO;
		return -1;
	}
	m->len = n;
	m->off = HOSTIF_HEADER;
	m->err = 0;
	return (int)rd32(m->b + 8);
}

/* "rnic-ok" in little-endian bytes, as internal/hostif.ProbeWord. */
static const volatile uint64_t hostif_probe = 0x006b6f2d63696e72ULL;

void hostif_hello_args(struct hostif_msg *m)
{
	hostif_u32(m, HOSTIF_VERSION);
	hostif_u64(m, (uintptr_t)&hostif_probe);
}

int hostif_hello(int fd)
{
	struct hostif_msg m;
	int fds[3], nfds = 3;
	hostif_begin(&m, HOSTIF_HELLO, 1);
	hostif_hello_args(&m);
	int r = hostif_call(fd, &m, fds, &nfds);
	for (int i = 0; i < nfds; i++)
		close(fds[i]); /* the device list does not need the doorbell page */
	return r;
}

int hostif_query_gid(int fd, uint8_t port, uint32_t index, uint8_t gid[16])
{
	struct hostif_msg m;
	hostif_begin(&m, HOSTIF_QUERY_GID, 2);
	hostif_u8(&m, port);
	hostif_u32(&m, index);
	int r = hostif_call(fd, &m, NULL, NULL);
	if (r)
		return r;
	const uint8_t *g = hostif_get(&m, 16);
	if (!g)
		return EPROTO;
	memcpy(gid, g, 16);
	return 0;
}

void hostif_run_dir(char *out, size_t n)
{
	const char *d = getenv("RNIC_RUN_DIR");
	if (d && *d) {
		snprintf(out, n, "%s", d);
		return;
	}
	d = getenv("XDG_RUNTIME_DIR");
	if (d && *d) {
		snprintf(out, n, "%s/rnic", d);
		return;
	}
	const char *tmp = getenv("TMPDIR");
	snprintf(out, n, "%s/rnic-%u", tmp && *tmp ? tmp : "/tmp", (unsigned)getuid());
}
