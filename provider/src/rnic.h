/* rnic's libibverbs: the objects behind libibverbs' structures. */
#ifndef RNIC_H
#define RNIC_H

#include <pthread.h>
#include <stdint.h>
#include <sys/un.h>

#include <infiniband/verbs.h>

#include "hostif.h"

/* A device: libibverbs' struct first, so that programs reading
 * ibv_device's fields (name, node_type) find them. */
struct rnic_device {
	struct ibv_device ibdev;
	char socket[sizeof(((struct sockaddr_un *)0)->sun_path)];
};

/* An open device: the extended context (its struct ibv_context last, as
 * verbs.h requires), the socket to the NIC and the doorbell page. */
struct rnic_context {
	pthread_mutex_t lock; /* one request at a time on the socket */
	uint32_t seq;
	int fd;
	void *db;
	int wake_fd;
	struct verbs_context vctx; /* last: its context is what programs hold */
};

/* rnic_call sends the request built in m (op) on the context's socket and
 * reads the reply into m: 0, or the errno. */
int rnic_call(struct ibv_context *c, struct hostif_msg *m, uint16_t op, int *fds, int *nfds);

struct ibv_qp *rnic_create_qp_ex(struct ibv_context *c, struct ibv_qp_init_attr_ex *attr);

#endif
