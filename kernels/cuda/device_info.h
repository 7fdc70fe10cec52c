/* device_info.h -- internal: the CUDA build's probe of the devices and its smallest kernel. */
#ifndef WEFT_KERNELS_CUDA_DEVICE_INFO_H_
#define WEFT_KERNELS_CUDA_DEVICE_INFO_H_

#ifdef __cplusplus
extern "C" {
#endif

/* Number of CUDA devices this process can use (0 without a driver or device). */
int kern_cuda_device_count(void);

/* Runs a kernel that writes a pattern and checks it on the host: 0 when it worked, -1 when there
 * is no device, a CUDA error code otherwise. */
int kern_cuda_selftest(void);

#ifdef __cplusplus
}
#endif

#endif /* WEFT_KERNELS_CUDA_DEVICE_INFO_H_ */
