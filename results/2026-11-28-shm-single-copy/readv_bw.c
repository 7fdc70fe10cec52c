/* readv_bw.c -- process_vm_readv from a parent into a child in pieces of 4 KiB..4 MiB, next to memcpy (256 MiB). */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
int main(int argc,char**argv){
  size_t total=256<<20; char *src=malloc(total); memset(src,1,total);
  pid_t parent=getpid();
  size_t chunks[]={4096,16384,65536,262144,1<<20,4<<20};
  if(fork()==0){
    char *dst=malloc(total); memset(dst,2,total);
    for(int c=0;c<6;c++){ size_t k=chunks[c];
      for(int rep=0;rep<2;rep++){
      double t0=now();
      for(size_t off=0;off<total;off+=k){ struct iovec l={dst+off,k},r={src+off,k}; if(process_vm_readv(parent,&l,1,&r,1,0)!=(ssize_t)k){perror("readv");exit(1);} }
      double t1=now();
      printf("readv chunk %7zu: %.2f GB/s\n",k,total/(t1-t0)/1e9);}
    }
    double t0=now(); memcpy(dst,src,total); double t1=now(); printf("memcpy %.2f GB/s\n",total/(t1-t0)/1e9);
    /* cache-resident: 64K memcpy repeated */
    exit(0);
  }
  wait(NULL); return 0;}
