// Queues: resources that hold tuples of tensors ("elements") between
// steps, to feed input pipelines and to coordinate steps that run
// concurrently, with TensorFlow's semantics.
//
// An element has one tensor per component (component_types); EnqueueMany
// splits tensors [n, ...] into n elements and DequeueMany stacks n
// elements back into tensors [n, ...]. Both wait without blocking a
// thread: they finish through a callback, called on whichever thread makes
// them possible (an enqueue completes a waiting dequeue, a close fails
// it). A FIFOQueue gives elements in the order they came; a
// RandomShuffleQueue gives a random one, keeping at least
// min_after_dequeue elements to choose from until it is closed, in an
// order fixed by its seed.
//
// Closing: later enqueues fail (CANCELLED), pending ones finish unless
// cancel_pending_enqueues; dequeues take what is left while there are
// enough, then fail with OUT_OF_RANGE ("queue 'q' is closed and has 3
// elements, fewer than the 10 requested"), the clean end-of-data signal.
//
// Elements live in host memory. All methods are thread-safe.
#ifndef WEFT_CORE_RUNTIME_QUEUE_H_
#define WEFT_CORE_RUNTIME_QUEUE_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "core/runtime/cancellation.h"
#include "core/runtime/resource_mgr.h"

namespace weft::runtime {

struct QueueSpec {
  // One dtype per component (numeric or bool); at least one.
  std::vector<DType> component_types;
  // The shape of each component of an element, fully defined; empty means
  // the first enqueue decides them for the queue's lifetime.
  std::vector<Shape> shapes;
  // Elements the queue holds at most; -1 = no limit.
  int64_t capacity = -1;

  // "component types [f32, i64], shapes [[2], []], capacity 10".
  std::string ToString() const;
};

class Queue : public Resource, public std::enable_shared_from_this<Queue> {
 public:
  // One host tensor per component.
  using Element = std::vector<Tensor>;
  using EnqueueDone = std::function<void(Status)>;
  using DequeueDone = std::function<void(Status, std::vector<Element>)>;

  ~Queue() override;
  Queue(const Queue&) = delete;
  Queue& operator=(const Queue&) = delete;

  const std::string& name() const override { return name_; }
  const QueueSpec& spec() const { return spec_; }

  // Adds the elements of |components| (host tensors, component i of
  // dtype component_types[i] and shape [n] + shapes[i]) in order, waiting
  // for room as needed, then calls |done| (maybe before returning). A
  // mismatch with the spec fails at once, naming the component; a closed
  // queue fails with CANCELLED. |cancellation| (optional) fails the wait
  // with CANCELLED when it fires; elements already in stay in.
  void EnqueueMany(std::vector<Tensor> components, CancellationManager* cancellation, EnqueueDone done);

  // Takes |n| >= 0 elements once they are there, then calls |done| with
  // them (maybe before returning). See above for a closed queue.
  // |cancellation| fails the wait with CANCELLED, returning any elements
  // taken so far to the queue.
  void DequeueMany(int64_t n, CancellationManager* cancellation, DequeueDone done);

  // Closes the queue (again is fine). With |cancel_pending_enqueues|,
  // enqueues still waiting fail with CANCELLED.
  void Close(bool cancel_pending_enqueues);

  // Elements held now.
  int64_t Size() const;
  bool IsClosed() const;
  // The element shapes: the spec's, or those of the first enqueue (unknown
  // rank before it).
  std::vector<Shape> ElementShapes() const;

  // Copies component |component| of every element into |out|, a
  // host-visible tensor [elements.size(), ...] of that component's dtype
  // and element shape (as DequeueMany's callers stack their result).
  static void Stack(const std::vector<Element>& elements, std::size_t component, const Tensor& out);

 protected:
  Queue(std::string name, QueueSpec spec) : name_(std::move(name)), spec_(std::move(spec)) {}

  // The element store, under |mutex_|.
  virtual std::size_t Stored() const = 0;
  virtual void Put(Element element) = 0;
  // Requires Stored() > 0.
  virtual Element Take() = 0;
  // Returns elements a dequeue had taken (oldest first).
  virtual void Restore(std::vector<Element> elements) = 0;
  // Whether a dequeue may take an element now (besides Stored() > 0).
  virtual bool MayTake() const { return true; }

  mutable std::mutex mutex_;
  bool closed_ = false;

 private:
  struct Attempt {
    int64_t id = 0;
    CancellationManager* cancellation = nullptr;
    CancellationManager::Token token = CancellationManager::kInvalidToken;
  };
  struct Enqueue : Attempt {
    std::vector<Element> elements;
    std::size_t next = 0;
    EnqueueDone done;
  };
  struct Dequeue : Attempt {
    int64_t n = 0;
    std::vector<Element> taken;
    DequeueDone done;
  };
  using Completions = std::vector<std::function<void()>>;

  // Checks |components| against the spec (and the first enqueue's shapes),
  // fixing the element shapes on the first one. Under |mutex_|.
  Status CheckComponents(const std::vector<Tensor>& components);
  // Moves elements between waiting enqueues, the store and waiting
  // dequeues until nothing more can happen; the callbacks to run once the
  // lock is released go to |out|.
  void Flush(Completions* out);
  // Registers |attempt| with its cancellation manager when it has to wait;
  // false when the manager is already cancelled.
  bool Park(Attempt& attempt);
  void Unpark(Attempt& attempt);
  void CancelAttempt(int64_t id);
  Status Closed() const;
  // "queue 'q'", for messages.
  std::string Named() const { return StrCat("queue '", name_, "'"); }

  std::string name_;
  QueueSpec spec_;
  // Under |mutex_|.
  std::vector<Shape> fixed_shapes_;
  int64_t next_id_ = 0;
  std::list<Enqueue> enqueues_;
  std::list<Dequeue> dequeues_;

  friend class FIFOQueue;
  friend class RandomShuffleQueue;
};

class FIFOQueue : public Queue {
 public:
  static std::shared_ptr<FIFOQueue> Create(std::string name, QueueSpec spec);
  std::string_view kind() const override { return "FIFO queue"; }

 private:
  using Queue::Queue;
  std::size_t Stored() const override { return elements_.size(); }
  void Put(Element element) override { elements_.push_back(std::move(element)); }
  Element Take() override;
  void Restore(std::vector<Element> elements) override;

  std::deque<Element> elements_;
};

class RandomShuffleQueue : public Queue {
 public:
  // |seed|, |seed2| as for the random ops: both 0 derives the seed from the
  // queue's name, so an unseeded graph still runs the same every time.
  static std::shared_ptr<RandomShuffleQueue> Create(std::string name, QueueSpec spec, int64_t min_after_dequeue,
                                                    int64_t seed, int64_t seed2);
  std::string_view kind() const override { return "random-shuffle queue"; }
  int64_t min_after_dequeue() const { return min_after_dequeue_; }

 private:
  RandomShuffleQueue(std::string name, QueueSpec spec, int64_t min_after_dequeue, uint64_t seed)
      : Queue(std::move(name), std::move(spec)), min_after_dequeue_(min_after_dequeue), gen_(seed) {}
  std::size_t Stored() const override { return elements_.size(); }
  void Put(Element element) override { elements_.push_back(std::move(element)); }
  Element Take() override;
  void Restore(std::vector<Element> elements) override;
  bool MayTake() const override { return closed_ || static_cast<int64_t>(elements_.size()) > min_after_dequeue_; }

  int64_t min_after_dequeue_;
  std::mt19937_64 gen_;
  std::vector<Element> elements_;
};

// Checks a spec (component types, shapes, capacity) for a new queue,
// naming what is wrong.
Status ValidateQueueSpec(const QueueSpec& spec);

}  // namespace weft::runtime

#endif  // WEFT_CORE_RUNTIME_QUEUE_H_
