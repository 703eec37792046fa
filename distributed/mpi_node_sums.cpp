#include "distributed/mpi_node_sums.hpp"

#include <cstdlib>
#include <utility>
#include <vector>

#include "distributed/mpi_check.hpp"
#include "kernels/bf16_math.hpp"
#include "kernels/error.hpp"

namespace noeira::dist {

// --- The layout --------------------------------------------------------------------------------

namespace {

// NOEIRA_RANKS_PER_NODE, or 0 when unset.
int pretended_ranks_per_node() {
  const char* v = std::getenv("NOEIRA_RANKS_PER_NODE");
  if (v == nullptr) return 0;
  char* end = nullptr;
  const long m = std::strtol(v, &end, 10);
  if (end == v || *end != '\0' || m < 1 || m > 1 << 20) {
    throw InputError(detail::concat("NOEIRA_RANKS_PER_NODE must be a whole number of ranks from 1, "
                                    "got '", v, "'"));
  }
  return static_cast<int>(m);
}

}  // namespace

NodeLayout mpi_node_layout(MPI_Comm comm, int rank) {
  MPI_Comm node = MPI_COMM_NULL;
  if (const int m = pretended_ranks_per_node(); m > 0) {
    NOEIRA_MPI_CHECK(MPI_Comm_split(comm, rank / m, rank, &node));
  } else {
    NOEIRA_MPI_CHECK(
        MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node));
  }
  // A node is named by its lowest rank; every rank learns every rank's.
  int lowest = rank;
  NOEIRA_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &lowest, 1, MPI_INT, MPI_MIN, node));
  NOEIRA_MPI_CHECK(MPI_Comm_free(&node));
  int size = 0;
  NOEIRA_MPI_CHECK(MPI_Comm_size(comm, &size));
  std::vector<int> lowest_of(static_cast<std::size_t>(size));
  NOEIRA_MPI_CHECK(MPI_Allgather(&lowest, 1, MPI_INT, lowest_of.data(), 1, MPI_INT, comm));
  return NodeLayout(lowest_of);
}

// --- NodeSums ----------------------------------------------------------------------------------

namespace {

// `count` elements of `dtype` at `data` (the staging of an op).
Buffer buffer_at(void* data, std::size_t count, DType dtype) {
  Buffer b;
  b.data = data;
  b.count = count;
  b.dtype = dtype;
  return b;
}

}  // namespace

struct NodeSums::Op {
  CollectiveCall call;  // as started
  // What the phases run: the call itself, or for a bf16 sum the same sum of its inputs widened to
  // fp32 (in `widened`), rounded into the call's output once it is done.
  CollectiveCall work;
  std::shared_ptr<char> widened;
  MPI_Datatype type = MPI_DATATYPE_NULL;  // of work's elements
  int phase = 0;                                // the next phase to start
  std::vector<std::unique_ptr<WorkImpl>> parts;  // the current phase's
  std::vector<MPI_Request> requests;             // the current phase's own MPI requests
  std::shared_ptr<char> staging;                 // K partials or inputs, [nodes][count]
  bool done = false;
};

std::unique_ptr<NodeSums> NodeSums::create(MPI_Comm comm, int rank, const NodeLayout& layout,
                                           MpiProgress& progress) {
  const int m = layout.block_size();
  if (layout.nodes() < 2 || m < 2) return nullptr;
  const int node_index = layout.node_of(rank);
  MPI_Comm node_comm = MPI_COMM_NULL, column_comm = MPI_COMM_NULL;
  NOEIRA_MPI_CHECK(MPI_Comm_split(comm, node_index, rank, &node_comm));
  std::unique_ptr<SharedSums> node = SharedSums::create(node_comm, rank % m, m, progress);
  // Every node must have taken the shared path, or none takes this one.
  int everywhere = node != nullptr ? 1 : 0;
  NOEIRA_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &everywhere, 1, MPI_INT, MPI_MIN, comm));
  if (!everywhere) {
    node.reset();  // collective over the node, whose ranks all came here
    NOEIRA_MPI_CHECK(MPI_Comm_free(&node_comm));
    return nullptr;
  }
  NOEIRA_MPI_CHECK(MPI_Comm_split(comm, rank % m, node_index, &column_comm));
  return std::unique_ptr<NodeSums>(
      new NodeSums(node_comm, column_comm, std::move(node), layout, rank, progress));
}

NodeSums::NodeSums(MPI_Comm node_comm, MPI_Comm column_comm, std::unique_ptr<SharedSums> node,
                   const NodeLayout& layout, int rank, MpiProgress& progress)
    : node_comm_(node_comm),
      column_comm_(column_comm),
      node_(std::move(node)),
      place_(rank % layout.block_size()),
      node_size_(layout.block_size()),
      nodes_(layout.nodes()),
      progress_(progress),
      column_(column_comm, layout.node_of(rank), layout.nodes(), progress,
              NodeLayout::one_node(layout.nodes())) {}

NodeSums::~NodeSums() {
  if (registered_) progress_.remove(this);
  node_.reset();  // its window first: collective over the node, whose communicator goes next
  MPI_Comm_free(&column_comm_);
  MPI_Comm_free(&node_comm_);
}

bool NodeSums::takes(const CollectiveCall& call) {
  return call.kind == Collective::AllReduce || call.kind == Collective::ReduceScatter ||
         call.kind == Collective::AllGather;
}

namespace {

bool is_bf16_sum(const CollectiveCall& call) {
  return call.out.dtype == DType::BF16 && call.kind != Collective::AllGather;
}

}  // namespace

// A bf16 sum is one fp32 sum of the bf16 inputs, rounded once (process_group.hpp): the node's
// partial sums must stay fp32, so the op sums an fp32 copy of its input, [input | output].
void NodeSums::widen(Op& op) {
  const CollectiveCall& c = op.call;
  const std::size_t in_count = c.kind == Collective::AllReduce ? c.out.count : c.in.count;
  const std::size_t out_count = c.kind == Collective::AllReduce ? 0 : c.out.count;
  op.widened = scratch_->acquire((in_count + out_count) * sizeof(float));
  auto* wide = reinterpret_cast<float*>(op.widened.get());
  const auto* bits = static_cast<const std::uint16_t*>(
      c.kind == Collective::AllReduce ? static_cast<const void*>(c.out.data) : c.in.data);
  for (std::size_t i = 0; i < in_count; ++i) wide[i] = bf16_value(bits[i]);
  op.work.in = buffer_at(wide, in_count, DType::F32);
  op.work.out = c.kind == Collective::AllReduce ? buffer_at(wide, in_count, DType::F32)
                                                 : buffer_at(wide + in_count, out_count,
                                                             DType::F32);
  op.type = MPI_FLOAT;
}

void NodeSums::round_out(Op& op) {
  const auto* wide = static_cast<const float*>(op.work.out.data);
  auto* bits = static_cast<std::uint16_t*>(op.call.out.data);
  for (std::size_t i = 0; i < op.call.out.count; ++i) bits[i] = bf16_bits(wide[i]);
  op.widened.reset();
}

std::unique_ptr<WorkImpl> NodeSums::start(const CollectiveCall& call, MPI_Datatype type) {
  NOEIRA_CHECK(takes(call), "node-wise sums: no ", to_string(call.kind), " of ",
               to_string(call.out.dtype));
  auto op = std::make_shared<Op>();
  op->call = call;
  op->work = call;
  op->type = type;
  if (is_bf16_sum(call) && call.count > 0) widen(*op);
  queue_.push_back(op);
  if (!registered_) {
    progress_.add(this);
    registered_ = true;
  }
  return std::make_unique<QueuedWork<Op>>(std::move(op), progress_, column_comm_);
}

bool NodeSums::advance() {
  while (!queue_.empty()) {
    Op& op = *queue_.front();
    for (const std::unique_ptr<WorkImpl>& part : op.parts) {
      if (!part->test()) return false;
    }
    if (!op.requests.empty()) {
      int flag = 0;
      NOEIRA_MPI_CHECK(MPI_Testall(static_cast<int>(op.requests.size()), op.requests.data(),
                                   &flag, MPI_STATUSES_IGNORE));
      if (!flag) return false;
      op.requests.clear();
    }
    op.parts.clear();
    if (op.call.count > 0 && start_phase(op)) continue;
    if (op.widened != nullptr) round_out(op);
    op.staging.reset();
    op.done = true;
    queue_.pop_front();
  }
  registered_ = false;
  return true;
}

bool NodeSums::start_phase(Op& op) {
  const int phase = op.phase++;
  if (phase > 2) return false;
  switch (op.work.kind) {
    case Collective::AllReduce: allreduce_phase(op, phase); break;
    case Collective::ReduceScatter: reduce_scatter_phase(op, phase); break;
    case Collective::AllGather: all_gather_phase(op, phase); break;
    case Collective::Broadcast:
    case Collective::Barrier: return false;
  }
  return true;
}

void NodeSums::in_node(Op& op, Collective kind, ConstBuffer in, Buffer out, std::int64_t count) {
  CollectiveCall part = op.work;
  part.kind = kind;
  part.in = in;
  part.out = out;
  part.count = count;
  op.parts.push_back(node_->start(part));
}

void NodeSums::in_column(Op& op, Collective kind, ConstBuffer in, Buffer out, int which) {
  CollectiveCall part = op.work;
  part.kind = kind;
  part.in = in;
  part.out = out;
  part.count = static_cast<std::int64_t>(out.count);
  part.seq = op.work.seq * 2 + static_cast<std::uint64_t>(which);  // distinct tags per part
  op.parts.push_back(kind == Collective::AllReduce ? column_.allreduce(part, op.type)
                                                   : column_.reduce_scatter(part, op.type));
}

// Part `place_` of the node's M equal parts, then the remainder.
void NodeSums::allreduce_phase(Op& op, int phase) {
  const auto m = static_cast<std::size_t>(node_size_);
  const auto count = static_cast<std::size_t>(op.work.count);
  const std::size_t q = count / m, rest = count % m;
  const Buffer buf = op.work.out;
  const Buffer mine = buf.sub(static_cast<std::size_t>(place_) * q, q);
  const Buffer whole = buf.sub(0, q * m);
  const Buffer tail = buf.sub(q * m, rest);
  switch (phase) {
    case 0:
      if (q > 0) in_node(op, Collective::ReduceScatter, whole, mine, static_cast<std::int64_t>(q));
      if (rest > 0) in_node(op, Collective::AllReduce, tail, tail, static_cast<std::int64_t>(rest));
      break;
    case 1:
      if (q > 0) in_column(op, Collective::AllReduce, mine, mine, 0);
      if (rest > 0) in_column(op, Collective::AllReduce, tail, tail, 1);
      break;
    case 2:
      if (q > 0) in_node(op, Collective::AllGather, mine, whole, static_cast<std::int64_t>(q));
      break;
  }
}

// The staging of an op: n elements for each of the K nodes, [nodes][n].
Buffer NodeSums::staging_of(Op& op) {
  const auto n = static_cast<std::size_t>(op.work.count);
  const auto k_nodes = static_cast<std::size_t>(nodes_);
  const DType dtype = op.work.out.dtype;
  if (op.staging == nullptr) op.staging = scratch_->acquire(n * k_nodes * dtype_size(dtype));
  return buffer_at(op.staging.get(), n * k_nodes, dtype);
}

void NodeSums::reduce_scatter_phase(Op& op, int phase) {
  const auto n = static_cast<std::size_t>(op.work.count);
  const auto m = static_cast<std::size_t>(node_size_);
  const Buffer staging = staging_of(op);
  if (phase == 0) {
    for (int k = 0; k < nodes_; ++k) {
      const auto at = static_cast<std::size_t>(k);
      in_node(op, Collective::ReduceScatter, op.work.in.sub(at * m * n, m * n),
              staging.sub(at * n, n), static_cast<std::int64_t>(n));
    }
  } else if (phase == 1) {
    in_column(op, Collective::ReduceScatter, staging, op.work.out, 0);
  }
}

void NodeSums::all_gather_phase(Op& op, int phase) {
  const auto n = static_cast<std::size_t>(op.work.count);
  const auto m = static_cast<std::size_t>(node_size_);
  const Buffer staging = staging_of(op);
  if (phase == 0) {
    NOEIRA_MPI_CHECK(MPI_Iallgather(op.work.in.data, static_cast<int>(n), op.type, staging.data,
                                    static_cast<int>(n), op.type, column_comm_,
                                    &op.requests.emplace_back()));
  } else if (phase == 1) {
    for (int k = 0; k < nodes_; ++k) {
      const auto at = static_cast<std::size_t>(k);
      in_node(op, Collective::AllGather, staging.sub(at * n, n), op.work.out.sub(at * m * n, m * n),
              static_cast<std::int64_t>(n));
    }
  }
}

}  // namespace noeira::dist
