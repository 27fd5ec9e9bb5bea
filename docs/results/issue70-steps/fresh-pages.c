// build: gcc -O2 -pthread -o fresh-pages fresh-pages.c; run: ./fresh-pages [GB to hold first]
// fresh pages: memcpy into a new 16 MiB mmap, vs MADV_POPULATE_WRITE first, vs 2 threads touching first;
// in a process holding HOLD_GB already (touched)
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <pthread.h>
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec*1e3+t.tv_nsec/1e6;}
static size_t N=16u<<20;
struct arg{char*p;size_t n;};
static void*touch(void*a){struct arg*x=a;for(size_t i=0;i<x->n;i+=4096)x->p[i]=0;return 0;}
int main(int argc,char**argv){
  double hold=argc>1?atof(argv[1]):0;
  size_t hb=(size_t)(hold*(1u<<30));
  if(hb){char*h=malloc(hb);memset(h,1,hb);}
  char*src=malloc(N);memset(src,2,N);
  for(int r=0;r<5;r++){
    for(int mode=0;mode<3;mode++){
      char*p=mmap(0,N,PROT_READ|PROT_WRITE,MAP_PRIVATE|MAP_ANONYMOUS,-1,0);
      double t0=now();
      if(mode==1){ if(madvise(p,N,MADV_POPULATE_WRITE)) perror("madvise"); }
      if(mode==2){pthread_t th;struct arg a={p,N/2},b={p+N/2,N/2};pthread_create(&th,0,touch,&a);touch(&b);pthread_join(th,0);}
      double t1=now();
      memcpy(p,src,N);
      double t2=now();
      printf("hold %.0f GB round %d mode %s: prepare %.2f ms, copy %.2f ms, total %.2f\n",hold,r,mode==0?"plain":mode==1?"populate":"2threads",t1-t0,t2-t1,t2-t0);
      munmap(p,N);
    }
  }
}
