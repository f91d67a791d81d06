// kernels/cuda/emu/nccl_emu.h -- the NCCL subset mingpt's CUDA backend uses
// (kernels/cuda/comm_nccl.cu), for emulated builds, with the ranks being the PROCESSES of an
// MPI job (mpirun -np N), one emulated GPU each. Included by cuda_emu.h (section 7); types,
// enums and signatures are those of the real <nccl.h>, whose declarations these definitions
// complete (as the cuBLAS shim does for <cublas_v2.h>).
//
//   ncclGetUniqueId      a 128-byte id unique to this call (pid, time, counter); no MPI
//   ncclCommInitRank     collective over MPI_COMM_WORLD (main thread, MPI initialised by the
//                        caller): checks nranks / rank against MPI's, MPI_Comm_dup's the world
//                        (MPI_ERRORS_RETURN) and checks that every rank passed rank 0's id
//   ncclAllReduce        validates its arguments (device memory, types, ops) at the call and
//                        enqueues onto the emulated stream a host operation that runs
//                        MPI_Allreduce(MPI_IN_PLACE, ...) on the duplicate communicator: in
//                        stream order, at once or, with EMU_DEFER=1, when the host synchronises
//                        (so on the synchronising thread: MPI must be initialised with
//                        MPI_THREAD_SERIALIZED at least, as mingpt's dist/comm_mpi.c does with
//                        MULTIPLE); fp32, fp64, int32, int64; sum, prod, max, min, avg
//   ncclReduce           the same, MPI_Reduce to root (MPI_IN_PLACE at root when send == recv;
//                        recv may be NULL except at root, and is not written elsewhere)
//   ncclBroadcast        the same, MPI_Bcast from root (send is read at root only)
//   ncclReduceScatter    the same, one chunked MPI_Reduce per rank q of the block
//                        send + q * recvcount to root q (in place when recv == send + rank *
//                        recvcount, as NCCL's)
//   ncclAllGather        the same, the rank's block copied to recv + rank * sendcount, then one
//                        chunked MPI_Bcast per rank q of its block (in place when send == recv +
//                        rank * sendcount)
//   ncclGroupStart/End   a per-thread nesting depth (ncclGroupEnd without a start: ncclInvalidUsage);
//                        the calls inside are enqueued as they come, in the order every rank
//                        makes them, which is what a group's collectives need here (each MPI call
//                        of one completes once every rank has made it, in that same order)
//   ncclCommGetAsyncError  ncclSystemError once an enqueued MPI call failed
//   ncclCommAbort        marks the communicator aborted (later operations fail, queued ones are
//                        skipped) and leaks it on purpose: another thread may be blocked inside
//                        MPI on it, and the caller is about to take the job down (MPI_Abort)
//   ncclCommDestroy      runs the queued work, frees the duplicate communicator (call it before
//                        MPI_Finalize)
//   ncclGetErrorString, ncclGetLastError, ncclCommCount, ncclCommUserRank
//
// Not emulated: other collectives (send/recv, all-to-all), bf16/fp16 reductions (MPI has no such types),
// non-blocking communicators, real concurrency between the comm stream and compute (the
// emulator's streams share one FIFO, see README.md).
#ifndef CUDA_EMU_NCCL_H
#define CUDA_EMU_NCCL_H 1

#ifndef OMPI_SKIP_MPICXX
#  define OMPI_SKIP_MPICXX 1   // the C API only (no deprecated C++ bindings)
#endif
#ifndef MPICH_SKIP_MPICXX
#  define MPICH_SKIP_MPICXX 1
#endif
#include <mpi.h>
#include <nccl.h>

struct ncclComm {
  MPI_Comm mpi = MPI_COMM_NULL;   // MPI_Comm_dup(MPI_COMM_WORLD)
  int rank = 0, nranks = 0, device = 0;
  std::atomic<int> async_error{ncclSuccess};
  std::atomic<bool> aborted{false};
  char last_error[512] = "";
};

namespace emu {
inline char* nccl_global_error() { static char buf[512] = ""; return buf; }
// Records the message (ncclGetLastError) and prints it like the emulator's other checks.
__attribute__((format(printf, 3, 4)))
inline ncclResult_t nccl_fail(ncclComm_t comm, ncclResult_t r, const char* fmt, ...) {
  char* buf = comm ? comm->last_error : nccl_global_error();
  va_list ap; va_start(ap, fmt); vsnprintf(buf, 512, fmt, ap); va_end(ap);
  fprintf(stderr, "[cuda-emu] %s\n", buf);
  return r;
}
inline bool nccl_type(ncclDataType_t t, MPI_Datatype* mt, size_t* es) {
  switch (t) {
    case ncclFloat32: *mt = MPI_FLOAT; *es = 4; return true;
    case ncclFloat64: *mt = MPI_DOUBLE; *es = 8; return true;
    case ncclInt32: *mt = MPI_INT32_T; *es = 4; return true;
    case ncclInt64: *mt = MPI_INT64_T; *es = 8; return true;
    default: return false;
  }
}
inline bool nccl_op(ncclRedOp_t op, MPI_Op* mo) {
  switch (op) {
    case ncclSum: case ncclAvg: *mo = MPI_SUM; return true;
    case ncclProd: *mo = MPI_PROD; return true;
    case ncclMax: *mo = MPI_MAX; return true;
    case ncclMin: *mo = MPI_MIN; return true;
    default: return false;
  }
}
// The checks every emulated collective makes at the call: a live communicator, an emulated
// type (and op: pass op < 0 for none). ncclSuccess or the error (recorded for ncclGetLastError).
inline ncclResult_t nccl_args(ncclComm_t comm, const char* name, ncclDataType_t dt, int op, MPI_Datatype* mt,
                              size_t* es, MPI_Op* mo) {
  if (!comm) return nccl_fail(nullptr, ncclInvalidArgument, "%s: comm is NULL", name);
  if (comm->aborted.load()) return nccl_fail(comm, ncclInvalidUsage, "%s: the communicator was aborted", name);
  if (!nccl_type(dt, mt, es))
    return nccl_fail(comm, ncclInvalidArgument, "%s: data type %d is not emulated (fp32, fp64, int32, int64 only: "
                     "MPI has no bf16/fp16)", name, (int)dt);
  if (op >= 0) {
    if (!nccl_op((ncclRedOp_t)op, mo)) return nccl_fail(comm, ncclInvalidArgument, "%s: reduction op %d is not emulated", name, op);
    if (op == ncclAvg && dt != ncclFloat32 && dt != ncclFloat64)
      return nccl_fail(comm, ncclInvalidArgument, "%s: ncclAvg on an integer type is not emulated", name);
  }
  return ncclSuccess;
}
// An enqueued MPI call of collective `name` failed with rc: recorded as the communicator's
// asynchronous error (ncclCommGetAsyncError), as NCCL reports a failure inside a kernel.
inline void nccl_async_fail(ncclComm_t comm, const char* name, size_t count, const char* mpi_call, int rc) {
  char s[MPI_MAX_ERROR_STRING]; int len = 0;
  if (MPI_Error_string(rc, s, &len) != MPI_SUCCESS) snprintf(s, sizeof s, "MPI error %d", rc);
  nccl_fail(comm, ncclSystemError, "%s (%zu elements) on rank %d: %s failed: %s", name, count, comm->rank, mpi_call, s);
  comm->async_error.store(ncclSystemError);
}
// x[0..count) /= nranks (ncclAvg, after the sum).
inline void nccl_avg(void* x, size_t count, ncclDataType_t dt, int nranks) {
  if (dt == ncclFloat32) for (size_t i = 0; i < count; i++) ((float*)x)[i] /= (float)nranks;
  else for (size_t i = 0; i < count; i++) ((double*)x)[i] /= (double)nranks;
}
constexpr size_t kMpiChunk = (size_t)1 << 30;   // MPI counts are int
// MPI_Reduce of count elements to root, chunked: at root, the sums land at recv (in place:
// send == recv); elsewhere recv is not touched. MPI_SUCCESS or the first failure.
inline int mpi_reduce_chunked(const void* send, void* recv, size_t count, size_t es, MPI_Datatype mt, MPI_Op mo,
                              int root, ncclComm_t comm) {
  for (size_t off = 0; off < count; off += kMpiChunk) {
    const int k = (int)std::min(kMpiChunk, count - off);
    int rc;
    if (comm->rank == root)
      rc = send == recv ? MPI_Reduce(MPI_IN_PLACE, (char*)recv + off * es, k, mt, mo, root, comm->mpi)
                        : MPI_Reduce((const char*)send + off * es, (char*)recv + off * es, k, mt, mo, root, comm->mpi);
    else
      rc = MPI_Reduce((const char*)send + off * es, nullptr, k, mt, mo, root, comm->mpi);
    if (rc != MPI_SUCCESS) return rc;
  }
  return MPI_SUCCESS;
}
inline int mpi_bcast_chunked(void* buf, size_t count, size_t es, MPI_Datatype mt, int root, ncclComm_t comm) {
  for (size_t off = 0; off < count; off += kMpiChunk) {
    const int rc = MPI_Bcast((char*)buf + off * es, (int)std::min(kMpiChunk, count - off), mt, root, comm->mpi);
    if (rc != MPI_SUCCESS) return rc;
  }
  return MPI_SUCCESS;
}
inline thread_local int nccl_group_depth = 0;   // ncclGroupStart/End nesting (NCCL's is per thread too)
}  // namespace emu

inline const char* ncclGetErrorString(ncclResult_t r) {
  switch (r) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error";
    case ncclSystemError: return "unhandled system error (the emulator's MPI call failed)";
    case ncclInternalError: return "internal error";
    case ncclInvalidArgument: return "invalid argument";
    case ncclInvalidUsage: return "invalid usage";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
    default: return "unknown result code";
  }
}
inline const char* ncclGetLastError(ncclComm_t comm) { return comm ? comm->last_error : emu::nccl_global_error(); }

inline ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
  if (!id) return emu::nccl_fail(nullptr, ncclInvalidArgument, "ncclGetUniqueId: id is NULL");
  static std::atomic<unsigned> counter{0};
  memset(id, 0, sizeof *id);
  const long long t = (long long)std::chrono::steady_clock::now().time_since_epoch().count();
  snprintf(id->internal, sizeof id->internal, "cuda-emu-nccl pid %ld t %lld n %u", (long)getpid(), t, counter.fetch_add(1));
  return ncclSuccess;
}

inline ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank) {
  if (!comm) return emu::nccl_fail(nullptr, ncclInvalidArgument, "ncclCommInitRank: comm is NULL");
  *comm = nullptr;
  int init = 0, fin = 0;
  MPI_Initialized(&init);
  MPI_Finalized(&fin);
  if (!init || fin)
    return emu::nccl_fail(nullptr, ncclInvalidUsage, "ncclCommInitRank: MPI is %s; the emulator's NCCL runs over MPI "
                          "(start the ranks with mpirun and initialise MPI first)", fin ? "finalized" : "not initialised");
  int wsize = 0, wrank = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &wsize);
  MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
  if (nranks != wsize || rank != wrank)
    return emu::nccl_fail(nullptr, ncclInvalidArgument, "ncclCommInitRank(nranks %d, rank %d): the emulator's ranks are "
                          "those of MPI_COMM_WORLD (this process is rank %d of %d)", nranks, rank, wrank, wsize);
  ncclComm* c = new ncclComm();
  c->rank = rank; c->nranks = nranks; c->device = emu::tl_device;
  if (MPI_Comm_dup(MPI_COMM_WORLD, &c->mpi) != MPI_SUCCESS) {
    delete c;
    return emu::nccl_fail(nullptr, ncclSystemError, "ncclCommInitRank: MPI_Comm_dup failed");
  }
  MPI_Comm_set_errhandler(c->mpi, MPI_ERRORS_RETURN);
  // every rank must have been given rank 0's id (it travels out of band, as with NCCL)
  char root[sizeof id.internal];
  memcpy(root, id.internal, sizeof root);
  int same = 0;
  if (MPI_Bcast(root, (int)sizeof root, MPI_BYTE, 0, c->mpi) == MPI_SUCCESS) same = memcmp(root, id.internal, sizeof root) == 0;
  if (MPI_Allreduce(MPI_IN_PLACE, &same, 1, MPI_INT, MPI_MIN, c->mpi) != MPI_SUCCESS) same = 0;
  if (!same) {
    MPI_Comm_free(&c->mpi);
    delete c;
    return emu::nccl_fail(nullptr, ncclInvalidUsage, "ncclCommInitRank: the ranks were given different ncclUniqueIds "
                          "(rank 0's id must be broadcast to every rank)");
  }
  *comm = c;
  return ncclSuccess;
}

inline ncclResult_t ncclCommCount(const ncclComm_t comm, int* n) {
  if (!comm || !n) return ncclInvalidArgument;
  *n = comm->nranks; return ncclSuccess;
}
inline ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* r) {
  if (!comm || !r) return ncclInvalidArgument;
  *r = comm->rank; return ncclSuccess;
}
inline ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* e) {
  if (!comm || !e) return ncclInvalidArgument;
  *e = (ncclResult_t)comm->async_error.load();
  return ncclSuccess;
}

inline ncclResult_t ncclAllReduce(const void* send, void* recv, size_t count, ncclDataType_t dt, ncclRedOp_t op,
                                  ncclComm_t comm, cudaStream_t stream) {
  (void)stream;   // one FIFO per device: stream order is submission order
  if (!comm) return emu::nccl_fail(nullptr, ncclInvalidArgument, "ncclAllReduce: comm is NULL");
  if (comm->aborted.load()) return emu::nccl_fail(comm, ncclInvalidUsage, "ncclAllReduce: the communicator was aborted");
  MPI_Datatype mt; size_t es; MPI_Op mo;
  if (!emu::nccl_type(dt, &mt, &es))
    return emu::nccl_fail(comm, ncclInvalidArgument, "ncclAllReduce: data type %d is not emulated (fp32, fp64, int32, int64 only: "
                          "MPI has no bf16/fp16)", (int)dt);
  if (!emu::nccl_op(op, &mo)) return emu::nccl_fail(comm, ncclInvalidArgument, "ncclAllReduce: reduction op %d is not emulated", (int)op);
  if (op == ncclAvg && dt != ncclFloat32 && dt != ncclFloat64)
    return emu::nccl_fail(comm, ncclInvalidArgument, "ncclAllReduce: ncclAvg on an integer type is not emulated");
  const size_t bytes = count * es;
  if (count && (!send || !recv || !emu::is_dev(send, bytes) || !emu::is_dev(recv, bytes)))
    return emu::nccl_fail(comm, ncclInvalidArgument, "ncclAllReduce: send %p / recv %p (%zu elements of %zu bytes) do not lie "
                          "inside device allocations; on a GPU this is an illegal address", send, recv, count, es);
  const int nranks = comm->nranks;
  emu::submit([=] {
    if (comm->aborted.load() || comm->async_error.load() != ncclSuccess) return;
    if (send != recv) memmove(recv, send, bytes);
    const size_t chunk = (size_t)1 << 30;   // MPI counts are int
    for (size_t off = 0; off < count; off += chunk) {
      const size_t k = std::min(chunk, count - off);
      const int rc = MPI_Allreduce(MPI_IN_PLACE, (char*)recv + off * es, (int)k, mt, mo, comm->mpi);
      if (rc != MPI_SUCCESS) {
        char s[MPI_MAX_ERROR_STRING]; int len = 0;
        if (MPI_Error_string(rc, s, &len) != MPI_SUCCESS) snprintf(s, sizeof s, "MPI error %d", rc);
        emu::nccl_fail(comm, ncclSystemError, "ncclAllReduce (%zu elements) on rank %d: MPI_Allreduce failed: %s", count, comm->rank, s);
        comm->async_error.store(ncclSystemError);
        return;
      }
    }
    if (op == ncclAvg) {
      if (dt == ncclFloat32) for (size_t i = 0; i < count; i++) ((float*)recv)[i] /= (float)nranks;
      else for (size_t i = 0; i < count; i++) ((double*)recv)[i] /= (double)nranks;
    }
  });
  return ncclSuccess;
}

inline ncclResult_t ncclReduce(const void* send, void* recv, size_t count, ncclDataType_t dt, ncclRedOp_t op, int root,
                               ncclComm_t comm, cudaStream_t stream) {
  (void)stream;   // one FIFO per device: stream order is submission order
  MPI_Datatype mt; size_t es; MPI_Op mo;
  if (ncclResult_t r = emu::nccl_args(comm, "ncclReduce", dt, (int)op, &mt, &es, &mo)) return r;
  if (root < 0 || root >= comm->nranks)
    return emu::nccl_fail(comm, ncclInvalidArgument, "ncclReduce: root %d is not a rank of %d", root, comm->nranks);
  const size_t bytes = count * es;
  const bool me = comm->rank == root;
  if (count && (!send || !emu::is_dev(send, bytes) || (me && (!recv || !emu::is_dev(recv, bytes)))))
    return emu::nccl_fail(comm, ncclInvalidArgument, "ncclReduce: send %p / recv %p (%zu elements of %zu bytes, root %d) do not "
                          "lie inside device allocations; on a GPU this is an illegal address", send, recv, count, es, root);
  const int nranks = comm->nranks;
  emu::submit([=] {
    if (comm->aborted.load() || comm->async_error.load() != ncclSuccess) return;
    const int rc = emu::mpi_reduce_chunked(send, recv, count, es, mt, mo, root, comm);
    if (rc != MPI_SUCCESS) return emu::nccl_async_fail(comm, "ncclReduce", count, "MPI_Reduce", rc);
    if (me && op == ncclAvg) emu::nccl_avg(recv, count, dt, nranks);
  });
  return ncclSuccess;
}

inline ncclResult_t ncclBroadcast(const void* send, void* recv, size_t count, ncclDataType_t dt, int root, ncclComm_t comm,
                                  cudaStream_t stream) {
  (void)stream;
  MPI_Datatype mt; size_t es; MPI_Op mo;
  if (ncclResult_t r = emu::nccl_args(comm, "ncclBroadcast", dt, -1, &mt, &es, &mo)) return r;
  if (root < 0 || root >= comm->nranks)
    return emu::nccl_fail(comm, ncclInvalidArgument, "ncclBroadcast: root %d is not a rank of %d", root, comm->nranks);
  const size_t bytes = count * es;
  const bool me = comm->rank == root;
  if (count && (!recv || !emu::is_dev(recv, bytes) || (me && (!send || !emu::is_dev(send, bytes)))))
    return emu::nccl_fail(comm, ncclInvalidArgument, "ncclBroadcast: send %p / recv %p (%zu elements of %zu bytes, root %d) do "
                          "not lie inside device allocations; on a GPU this is an illegal address", send, recv, count, es, root);
  emu::submit([=] {
    if (comm->aborted.load() || comm->async_error.load() != ncclSuccess) return;
    if (me && send != recv) memmove(recv, send, bytes);
    const int rc = emu::mpi_bcast_chunked(recv, count, es, mt, root, comm);
    if (rc != MPI_SUCCESS) emu::nccl_async_fail(comm, "ncclBroadcast", count, "MPI_Bcast", rc);
  });
  return ncclSuccess;
}

inline ncclResult_t ncclReduceScatter(const void* send, void* recv, size_t recvcount, ncclDataType_t dt, ncclRedOp_t op,
                                      ncclComm_t comm, cudaStream_t stream) {
  (void)stream;
  MPI_Datatype mt; size_t es; MPI_Op mo;
  if (ncclResult_t r = emu::nccl_args(comm, "ncclReduceScatter", dt, (int)op, &mt, &es, &mo)) return r;
  const int nranks = comm->nranks, rank = comm->rank;
  const size_t bytes = recvcount * es;
  if (recvcount && (!send || !recv || !emu::is_dev(send, bytes * (size_t)nranks) || !emu::is_dev(recv, bytes)))
    return emu::nccl_fail(comm, ncclInvalidArgument, "ncclReduceScatter: send %p (%d x %zu elements of %zu bytes) / recv %p do "
                          "not lie inside device allocations; on a GPU this is an illegal address", send, nranks, recvcount,
                          es, recv);
  emu::submit([=] {
    if (comm->aborted.load() || comm->async_error.load() != ncclSuccess) return;
    const char* own = (const char*)send + (size_t)rank * bytes;
    for (int q = 0; q < nranks; q++) {
      const char* block = (const char*)send + (size_t)q * bytes;
      // at root q: in place when recv is its own block, else into recv
      const int rc = emu::mpi_reduce_chunked(q == rank && own == recv ? recv : block, recv, recvcount, es, mt, mo, q, comm);
      if (rc != MPI_SUCCESS) return emu::nccl_async_fail(comm, "ncclReduceScatter", recvcount, "MPI_Reduce", rc);
    }
    if (op == ncclAvg) emu::nccl_avg(recv, recvcount, dt, nranks);
  });
  return ncclSuccess;
}

inline ncclResult_t ncclAllGather(const void* send, void* recv, size_t sendcount, ncclDataType_t dt, ncclComm_t comm,
                                  cudaStream_t stream) {
  (void)stream;
  MPI_Datatype mt; size_t es; MPI_Op mo;
  if (ncclResult_t r = emu::nccl_args(comm, "ncclAllGather", dt, -1, &mt, &es, &mo)) return r;
  const int nranks = comm->nranks, rank = comm->rank;
  const size_t bytes = sendcount * es;
  if (sendcount && (!send || !recv || !emu::is_dev(send, bytes) || !emu::is_dev(recv, bytes * (size_t)nranks)))
    return emu::nccl_fail(comm, ncclInvalidArgument, "ncclAllGather: send %p (%zu elements of %zu bytes) / recv %p (%d x as many) "
                          "do not lie inside device allocations; on a GPU this is an illegal address", send, sendcount, es,
                          recv, nranks);
  emu::submit([=] {
    if (comm->aborted.load() || comm->async_error.load() != ncclSuccess) return;
    char* own = (char*)recv + (size_t)rank * bytes;
    if (own != send) memmove(own, send, bytes);
    for (int q = 0; q < nranks; q++) {
      const int rc = emu::mpi_bcast_chunked((char*)recv + (size_t)q * bytes, sendcount, es, mt, q, comm);
      if (rc != MPI_SUCCESS) return emu::nccl_async_fail(comm, "ncclAllGather", sendcount, "MPI_Bcast", rc);
    }
  });
  return ncclSuccess;
}

inline ncclResult_t ncclGroupStart() {
  emu::nccl_group_depth++;
  return ncclSuccess;
}
inline ncclResult_t ncclGroupEnd() {
  if (emu::nccl_group_depth == 0)
    return emu::nccl_fail(nullptr, ncclInvalidUsage, "ncclGroupEnd: no group was started (ncclGroupStart) on this thread");
  emu::nccl_group_depth--;
  return ncclSuccess;
}

inline ncclResult_t ncclCommAbort(ncclComm_t comm) {
  if (!comm) return ncclSuccess;
  comm->aborted.store(true);
  comm->async_error.store(ncclInvalidUsage);   // what a later ncclCommGetAsyncError reports
  return ncclSuccess;                          // leaked on purpose (see the top of this file)
}

inline ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  if (!comm) return ncclSuccess;
  if (comm->aborted.load()) return ncclSuccess;   // leaked on purpose
  emu::flush(comm->device);                       // queued all-reduces use the communicator
  int fin = 0;
  MPI_Finalized(&fin);
  if (!fin && comm->mpi != MPI_COMM_NULL) MPI_Comm_free(&comm->mpi);
  delete comm;
  return ncclSuccess;
}

#endif  // CUDA_EMU_NCCL_H
