#include "core/runtime/queue.h"

#include <cstring>

#include "core/base/hash.h"
#include "core/base/seeded_random.h"

namespace weft::runtime {
namespace {

std::string TypesText(const std::vector<DType>& types) {
  std::vector<std::string> names;
  for (DType d : types) names.emplace_back(DTypeName(d));
  return StrCat("[", StrJoin(names, ", "), "]");
}

std::string ShapesText(const std::vector<Shape>& shapes) {
  std::vector<std::string> texts;
  for (const Shape& s : shapes) texts.push_back(s.ToString());
  return StrCat("[", StrJoin(texts, ", "), "]");
}

std::string Elements(int64_t n) { return StrCat(n, n == 1 ? " element" : " elements"); }

// A fixed hash of the queue's name for unseeded queues.
uint64_t NameSeed(const std::string& name) { return Fnv1aHash(name); }

}  // namespace

std::string QueueSpec::ToString() const {
  return StrCat("component types ", TypesText(component_types), ", shapes ",
                shapes.empty() ? std::string("unspecified") : ShapesText(shapes), ", capacity ",
                capacity < 0 ? std::string("unbounded") : StrCat(capacity));
}

Status ValidateQueueSpec(const QueueSpec& spec) {
  if (spec.component_types.empty()) return InvalidArgumentError("a queue needs at least one component type");
  for (std::size_t i = 0; i < spec.component_types.size(); ++i) {
    const DType d = spec.component_types[i];
    if (d == DType::kString || d == DType::kResource || d == DType::kInvalid) {
      return InvalidArgumentError("component ", i, " has dtype ", DTypeName(d),
                                  "; queues hold numeric and bool tensors");
    }
  }
  if (!spec.shapes.empty() && spec.shapes.size() != spec.component_types.size()) {
    return InvalidArgumentError("shapes has ", spec.shapes.size(), " entries but there are ",
                                spec.component_types.size(), " component types; give one shape per component, or none");
  }
  for (std::size_t i = 0; i < spec.shapes.size(); ++i) {
    if (!spec.shapes[i].IsFullyDefined()) {
      return InvalidArgumentError("shapes[", i, "] is ", spec.shapes[i].ToString(),
                                  "; queue shapes must be fully defined");
    }
  }
  if (spec.capacity == 0 || spec.capacity < -1) {
    return InvalidArgumentError("capacity is ", spec.capacity, "; it must be at least 1, or -1 for no limit");
  }
  return Status();
}

Queue::~Queue() = default;

int64_t Queue::Size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return static_cast<int64_t>(Stored());
}

bool Queue::IsClosed() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return closed_;
}

std::vector<Shape> Queue::ElementShapes() const {
  if (!spec_.shapes.empty()) return spec_.shapes;
  std::lock_guard<std::mutex> lock(mutex_);
  if (!fixed_shapes_.empty()) return fixed_shapes_;
  return std::vector<Shape>(spec_.component_types.size(), Shape::UnknownRank());
}

Status Queue::Closed() const {
  return Status(Code::kCancelled, StrCat(Named(), " is closed; nothing more can be enqueued"));
}

Status Queue::CheckComponents(const std::vector<Tensor>& components) {
  const auto& types = spec_.component_types;
  if (components.size() != types.size()) {
    return InvalidArgumentError(Named(), " has ", types.size(), " component", types.size() == 1 ? "" : "s", " ",
                                TypesText(types), "; ", components.size(), components.size() == 1 ? " was" : " were",
                                " given");
  }
  int64_t n = -1;
  for (std::size_t i = 0; i < components.size(); ++i) {
    const Tensor& c = components[i];
    if (c.dtype() != types[i]) {
      return InvalidArgumentError("component ", i, " of ", Named(), " is ", DTypeName(types[i]), "; got ",
                                  c.TypeString());
    }
    if (c.rank() < 1) {
      return InvalidArgumentError("component ", i, " for ", Named(),
                                  " is a scalar; enqueueing many needs "
                                  "a leading dimension of elements");
    }
    if (n >= 0 && c.dim(0) != n) {
      return InvalidArgumentError("the components hold different numbers of elements: ", n, " in component 0, ",
                                  c.dim(0), " in component ", i);
    }
    n = c.dim(0);
  }
  std::vector<Shape> given;
  for (const Tensor& c : components) {
    given.emplace_back(std::vector<int64_t>(c.shape().dims().begin() + 1, c.shape().dims().end()));
  }
  const std::vector<Shape>& want = !spec_.shapes.empty() ? spec_.shapes : fixed_shapes_;
  if (want.empty()) {
    // The first enqueue decides the element shapes of a queue without shapes.
    fixed_shapes_ = given;
    return Status();
  }
  for (std::size_t i = 0; i < given.size(); ++i) {
    if (given[i] != want[i]) {
      return InvalidArgumentError("component ", i, " of an element of ", Named(), " has shape ", want[i].ToString(),
                                  spec_.shapes.empty() ? " (set by its first enqueue)" : "", "; got elements of shape ",
                                  given[i].ToString(), " (from ", components[i].TypeString(), ")");
    }
  }
  return Status();
}

void Queue::EnqueueMany(std::vector<Tensor> components, CancellationManager* cancellation, EnqueueDone done) {
  for (const Tensor& c : components) {
    if (!c.host_visible()) {
      done(InvalidArgumentError("enqueue into ", Named(), ": components must be in host memory"));
      return;
    }
  }
  Completions completions;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (closed_) {
      completions.push_back([done = std::move(done), status = Closed()] { done(status); });
    } else if (Status bad = CheckComponents(components); !bad.ok()) {
      completions.push_back([done = std::move(done), bad] { done(bad); });
    } else {
      Enqueue e;
      const int64_t id = e.id = next_id_++;
      e.cancellation = cancellation;
      e.done = std::move(done);
      // Each element views its slice of the batch: no copy.
      const int64_t n = components[0].dim(0);
      for (int64_t k = 0; k < n; ++k) {
        Element element;
        for (const Tensor& c : components) {
          const Shape shape(std::vector<int64_t>(c.shape().dims().begin() + 1, c.shape().dims().end()));
          const uint64_t bytes = static_cast<uint64_t>(shape.num_elements()) * DTypeSize(c.dtype());
          element.emplace_back(c.dtype(), shape, c.buffer(), c.offset() + static_cast<uint64_t>(k) * bytes);
        }
        e.elements.push_back(std::move(element));
      }
      enqueues_.push_back(std::move(e));
      Flush(&completions);
      for (auto it = enqueues_.begin(); it != enqueues_.end(); ++it) {
        if (it->id != id) continue;
        if (!Park(*it)) {
          const std::size_t in = it->next, total = it->elements.size();
          completions.push_back([done = std::move(it->done), name = name_, in, total] {
            done(Status(Code::kCancelled, StrCat("the step was cancelled while waiting to enqueue into queue ", "'",
                                                 name, "' (", in, " of ", total, " elements are in)")));
          });
          enqueues_.erase(it);
          Flush(&completions);
        }
        break;
      }
    }
  }
  for (auto& c : completions) c();
}

void Queue::DequeueMany(int64_t n, CancellationManager* cancellation, DequeueDone done) {
  if (n < 0) {
    done(InvalidArgumentError("cannot dequeue ", n, " elements from ", Named()), {});
    return;
  }
  Completions completions;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    Dequeue d;
    d.id = next_id_++;
    d.cancellation = cancellation;
    d.n = n;
    d.done = std::move(done);
    const int64_t id = d.id;
    dequeues_.push_back(std::move(d));
    Flush(&completions);
    for (auto it = dequeues_.begin(); it != dequeues_.end(); ++it) {
      if (it->id != id) continue;
      if (!Park(*it)) {
        Restore(std::move(it->taken));
        completions.push_back([done = std::move(it->done), name = name_, n] {
          done(Status(Code::kCancelled, StrCat("the step was cancelled while waiting to dequeue ", Elements(n),
                                               " from queue '", name, "'")),
               {});
        });
        dequeues_.erase(it);
        Flush(&completions);
      }
      break;
    }
  }
  for (auto& c : completions) c();
}

void Queue::Close(bool cancel_pending_enqueues) {
  Completions completions;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    closed_ = true;
    if (cancel_pending_enqueues) {
      for (Enqueue& e : enqueues_) {
        Unpark(e);
        completions.push_back([done = std::move(e.done), name = name_, in = e.next, total = e.elements.size()] {
          done(Status(Code::kCancelled, StrCat("enqueue into queue '", name,
                                               "' was cancelled when the queue "
                                               "was closed (",
                                               in, " of ", total, " elements are in)")));
        });
      }
      enqueues_.clear();
    }
    Flush(&completions);
  }
  for (auto& c : completions) c();
}

bool Queue::Park(Attempt& attempt) {
  if (attempt.cancellation == nullptr) return true;
  std::weak_ptr<Queue> self = weak_from_this();
  const int64_t id = attempt.id;
  attempt.token = attempt.cancellation->Register([self, id] {
    if (auto queue = self.lock()) queue->CancelAttempt(id);
  });
  return attempt.token != CancellationManager::kInvalidToken;
}

void Queue::Unpark(Attempt& attempt) {
  if (attempt.cancellation != nullptr && attempt.token != CancellationManager::kInvalidToken) {
    attempt.cancellation->Deregister(attempt.token);
  }
}

void Queue::CancelAttempt(int64_t id) {
  Completions completions;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto it = enqueues_.begin(); it != enqueues_.end(); ++it) {
      if (it->id != id) continue;
      completions.push_back([done = std::move(it->done), name = name_, in = it->next, total = it->elements.size()] {
        done(Status(Code::kCancelled, StrCat("the step was cancelled while waiting to enqueue into queue ", "'", name,
                                             "' (", in, " of ", total, " elements are in)")));
      });
      enqueues_.erase(it);
      break;
    }
    for (auto it = dequeues_.begin(); it != dequeues_.end(); ++it) {
      if (it->id != id) continue;
      Restore(std::move(it->taken));
      completions.push_back([done = std::move(it->done), name = name_, n = it->n] {
        done(Status(Code::kCancelled, StrCat("the step was cancelled while waiting to dequeue ", Elements(n),
                                             " from queue '", name, "'")),
             {});
      });
      dequeues_.erase(it);
      break;
    }
    Flush(&completions);
  }
  for (auto& c : completions) c();
}

void Queue::Flush(Completions* out) {
  auto has_room = [&] { return spec_.capacity < 0 || static_cast<int64_t>(Stored()) < spec_.capacity; };
  while (true) {
    bool progress = true;
    while (progress) {
      progress = false;
      while (!enqueues_.empty()) {
        Enqueue& e = enqueues_.front();
        while (e.next < e.elements.size() && has_room()) {
          Put(std::move(e.elements[e.next++]));
          progress = true;
        }
        if (e.next < e.elements.size()) break;
        Unpark(e);
        out->push_back([done = std::move(e.done)] { done(Status()); });
        enqueues_.pop_front();
        progress = true;
      }
      while (!dequeues_.empty()) {
        Dequeue& d = dequeues_.front();
        while (static_cast<int64_t>(d.taken.size()) < d.n && Stored() > 0 && MayTake()) {
          d.taken.push_back(Take());
          progress = true;
        }
        if (static_cast<int64_t>(d.taken.size()) < d.n) break;
        Unpark(d);
        out->push_back(
            [done = std::move(d.done), taken = std::move(d.taken)]() mutable { done(Status(), std::move(taken)); });
        dequeues_.pop_front();
        progress = true;
      }
    }
    // Nothing more moves. A closed queue that no enqueue will refill fails
    // the first waiting dequeue (a closed queue lets dequeues take every
    // element, so it cannot be satisfied), returning what it took; the
    // next may fit what is left.
    if (!closed_ || !enqueues_.empty() || dequeues_.empty()) return;
    Dequeue& d = dequeues_.front();
    const auto have = static_cast<int64_t>(d.taken.size() + Stored());
    Restore(std::move(d.taken));
    Unpark(d);
    out->push_back([done = std::move(d.done), name = name_, have, n = d.n] {
      done(OutOfRangeError("queue '", name, "' is closed and has ", Elements(have), ", fewer than the ", n,
                           " requested"),
           {});
    });
    dequeues_.pop_front();
  }
}

void Queue::Stack(const std::vector<Element>& elements, std::size_t component, const Tensor& out) {
  auto* to = static_cast<char*>(out.raw_data());
  for (const Element& element : elements) {
    const Tensor& t = element[component];
    if (t.byte_size() > 0) std::memcpy(to, t.raw_data(), t.byte_size());
    to += t.byte_size();
  }
}

// --- FIFOQueue ------------------------------------------------------------------

std::shared_ptr<FIFOQueue> FIFOQueue::Create(std::string name, QueueSpec spec) {
  return std::shared_ptr<FIFOQueue>(new FIFOQueue(std::move(name), std::move(spec)));
}

Queue::Element FIFOQueue::Take() {
  Element e = std::move(elements_.front());
  elements_.pop_front();
  return e;
}

void FIFOQueue::Restore(std::vector<Element> elements) {
  for (auto it = elements.rbegin(); it != elements.rend(); ++it) elements_.push_front(std::move(*it));
}

// --- RandomShuffleQueue ---------------------------------------------------------

std::shared_ptr<RandomShuffleQueue> RandomShuffleQueue::Create(std::string name, QueueSpec spec,
                                                               int64_t min_after_dequeue, int64_t seed, int64_t seed2) {
  const uint64_t key =
      seed == 0 && seed2 == 0 ? NameSeed(name) : MixSeed(static_cast<uint64_t>(seed), static_cast<uint64_t>(seed2));
  return std::shared_ptr<RandomShuffleQueue>(
      new RandomShuffleQueue(std::move(name), std::move(spec), min_after_dequeue, key));
}

Queue::Element RandomShuffleQueue::Take() {
  const auto k = static_cast<std::size_t>(UniformBelow(gen_, elements_.size()));
  std::swap(elements_[k], elements_.back());
  Element e = std::move(elements_.back());
  elements_.pop_back();
  return e;
}

void RandomShuffleQueue::Restore(std::vector<Element> elements) {
  for (Element& e : elements) elements_.push_back(std::move(e));
}

}  // namespace weft::runtime
