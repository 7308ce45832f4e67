/*
 * rdma-core's private interface (IBVERBS_PRIVATE_34): what its providers
 * import from libibverbs (the ibv_cmd_* kernel commands, the driver
 * registration). Debian's perftest links libmlx5 and libefa, which import
 * these, so the library must define them for those libraries to load;
 * they serve mlx5 and EFA devices only and are never called for rnic's,
 * except verbs_register_driver_34, which the providers' constructors
 * call to register with libibverbs (here: ignored, as rnic's devices are
 * the only ones). If called, each fails: the kernel commands (ibv_cmd_*,
 * execute_ioctl), which return an errno, return EOPNOTSUPP; the others
 * return 0 (NULL for those returning pointers, nothing for those
 * returning nothing) with errno EOPNOTSUPP. This file does not include
 * <infiniband/verbs.h>: rdma-core's driver.h, which declares them, is not
 * installed.
 */
#include <errno.h>

#define UNSUPPORTED(name)                  \
	long name(void);                   \
	long name(void)                    \
	{                                  \
		errno = EOPNOTSUPP;        \
		return 0;                  \
	}

/* A kernel command: its return value is the errno (0 is success). */
#define UNSUPPORTED_CMD(name)              \
	int name(void);                    \
	int name(void)                     \
	{                                  \
		errno = EOPNOTSUPP;        \
		return EOPNOTSUPP;         \
	}

UNSUPPORTED(__ioctl_final_num_attrs)
UNSUPPORTED(__verbs_log)
UNSUPPORTED(_verbs_init_and_alloc_context)
UNSUPPORTED_CMD(execute_ioctl)
UNSUPPORTED_CMD(ibv_cmd_advise_mr)
UNSUPPORTED_CMD(ibv_cmd_alloc_dm)
UNSUPPORTED_CMD(ibv_cmd_alloc_mw)
UNSUPPORTED_CMD(ibv_cmd_alloc_pd)
UNSUPPORTED_CMD(ibv_cmd_attach_mcast)
UNSUPPORTED_CMD(ibv_cmd_close_xrcd)
UNSUPPORTED_CMD(ibv_cmd_create_ah)
UNSUPPORTED_CMD(ibv_cmd_create_counters)
UNSUPPORTED_CMD(ibv_cmd_create_cq)
UNSUPPORTED_CMD(ibv_cmd_create_cq_ex)
UNSUPPORTED_CMD(ibv_cmd_create_flow)
UNSUPPORTED_CMD(ibv_cmd_create_flow_action_esp)
UNSUPPORTED_CMD(ibv_cmd_create_qp)
UNSUPPORTED_CMD(ibv_cmd_create_qp_ex)
UNSUPPORTED_CMD(ibv_cmd_create_qp_ex2)
UNSUPPORTED_CMD(ibv_cmd_create_rwq_ind_table)
UNSUPPORTED_CMD(ibv_cmd_create_srq)
UNSUPPORTED_CMD(ibv_cmd_create_srq_ex)
UNSUPPORTED_CMD(ibv_cmd_create_wq)
UNSUPPORTED_CMD(ibv_cmd_dealloc_mw)
UNSUPPORTED_CMD(ibv_cmd_dealloc_pd)
UNSUPPORTED_CMD(ibv_cmd_dereg_mr)
UNSUPPORTED_CMD(ibv_cmd_destroy_ah)
UNSUPPORTED_CMD(ibv_cmd_destroy_counters)
UNSUPPORTED_CMD(ibv_cmd_destroy_cq)
UNSUPPORTED_CMD(ibv_cmd_destroy_flow)
UNSUPPORTED_CMD(ibv_cmd_destroy_flow_action)
UNSUPPORTED_CMD(ibv_cmd_destroy_qp)
UNSUPPORTED_CMD(ibv_cmd_destroy_rwq_ind_table)
UNSUPPORTED_CMD(ibv_cmd_destroy_srq)
UNSUPPORTED_CMD(ibv_cmd_destroy_wq)
UNSUPPORTED_CMD(ibv_cmd_detach_mcast)
UNSUPPORTED_CMD(ibv_cmd_free_dm)
UNSUPPORTED_CMD(ibv_cmd_get_context)
UNSUPPORTED_CMD(ibv_cmd_modify_cq)
UNSUPPORTED_CMD(ibv_cmd_modify_flow_action_esp)
UNSUPPORTED_CMD(ibv_cmd_modify_qp)
UNSUPPORTED_CMD(ibv_cmd_modify_qp_ex)
UNSUPPORTED_CMD(ibv_cmd_modify_srq)
UNSUPPORTED_CMD(ibv_cmd_modify_wq)
UNSUPPORTED_CMD(ibv_cmd_open_qp)
UNSUPPORTED_CMD(ibv_cmd_open_xrcd)
UNSUPPORTED_CMD(ibv_cmd_poll_cq)
UNSUPPORTED_CMD(ibv_cmd_post_recv)
UNSUPPORTED_CMD(ibv_cmd_post_send)
UNSUPPORTED_CMD(ibv_cmd_post_srq_recv)
UNSUPPORTED_CMD(ibv_cmd_query_context)
UNSUPPORTED_CMD(ibv_cmd_query_device_any)
UNSUPPORTED_CMD(ibv_cmd_query_mr)
UNSUPPORTED_CMD(ibv_cmd_query_port)
UNSUPPORTED_CMD(ibv_cmd_query_qp)
UNSUPPORTED_CMD(ibv_cmd_query_srq)
UNSUPPORTED_CMD(ibv_cmd_read_counters)
UNSUPPORTED_CMD(ibv_cmd_reg_dm_mr)
UNSUPPORTED_CMD(ibv_cmd_reg_dmabuf_mr)
UNSUPPORTED_CMD(ibv_cmd_reg_mr)
UNSUPPORTED_CMD(ibv_cmd_req_notify_cq)
UNSUPPORTED_CMD(ibv_cmd_rereg_mr)
UNSUPPORTED_CMD(ibv_cmd_resize_cq)
_Bool verbs_allow_disassociate_destroy; /* a variable in rdma-core */
UNSUPPORTED(verbs_init_cq)
UNSUPPORTED(verbs_open_device)
UNSUPPORTED(verbs_register_driver_34)
UNSUPPORTED(verbs_set_ops)
UNSUPPORTED(verbs_uninit_context)

/* Public symbols declared in no installed header (the ibv_copy_*_kern
 * ones are in rnic_str.c). */
