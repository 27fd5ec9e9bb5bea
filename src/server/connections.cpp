// Connections of `editspec serve` (server-connections.h).
#include "server-connections.h"

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace editspec {

namespace {

class connection_pool : public httplib::TaskQueue {
public:
    explicit connection_pool(size_t max_threads) : max_threads_(max_threads) {}
    ~connection_pool() override { shutdown(); }

    void enqueue(std::function<void()> fn) override {
        {
            std::lock_guard<std::mutex> lock(mu_);
            jobs_.push_back(std::move(fn));
            // every queued connection has an idle thread to take it, or gets a new one
            if (jobs_.size() > n_idle_ && threads_.size() < max_threads_) threads_.emplace_back([this] { work(); });
        }
        cv_.notify_one();
    }

    void shutdown() override {
        {
            std::lock_guard<std::mutex> lock(mu_);
            stopping_ = true;
        }
        cv_.notify_all();
        for (std::thread & t : threads_) {
            if (t.joinable()) t.join();
        }
    }

private:
    void work() {
        while (true) {
            std::function<void()> fn;
            {
                std::unique_lock<std::mutex> lock(mu_);
                n_idle_++;
                cv_.wait(lock, [&] { return stopping_ || !jobs_.empty(); });
                n_idle_--;
                if (jobs_.empty()) return;
                fn = std::move(jobs_.front());
                jobs_.pop_front();
            }
            fn();
        }
    }

    const size_t max_threads_;
    std::mutex mu_;
    std::condition_variable cv_;
    std::deque<std::function<void()>> jobs_;
    std::vector<std::thread> threads_;
    size_t n_idle_ = 0;
    bool stopping_ = false;
};

} // namespace

httplib::TaskQueue * connection_pool_new(size_t max_threads) {
    return new connection_pool(max_threads);
}

} // namespace editspec
