#pragma once
/// @file Discounted scheduling (paper, introduction: admins "charge less to a job that lets its
/// I/O run longer"). A job names an I/O service class, its `io_qos`; the class says how much
/// slower than alone the job lets its I/O run (the scheduler makes its phases yield to those of
/// less patient jobs within that bound, scheduler.hpp) and what fraction of the normal price it
/// pays. The rule, and its Slurm analogy, are in docs/scheduling-model.md, section 9.

#include <string>
#include <vector>

namespace harmonia::core {

/// An I/O service class, as Slurm's QOS with a UsageFactor.
struct IoClass {
  std::string name;
  /// The I/O slowdown the job accepts: its phases (wait for a grant plus the I/O) may take up to
  /// this many times their time alone. 1: it yields to no one (a normal job).
  double slowdown = 1;
  /// The fraction of the normal price it pays (Slurm's QOS UsageFactor).
  double usage_factor = 1;
};

struct PricingConfig {
  /// Billing units per node-hour (Slurm's TRES billing weight of a node).
  double node_hour_rate = 1;
  /// The named classes; the defaults are `default_io_classes()`.
  std::vector<IoClass> classes;

  PricingConfig();
  /// The class a job's `io_qos` names: a class name, or a number >= 1, the slowdown the job
  /// accepts, priced by interpolating linearly between the classes on either side of it (clamped
  /// to the most and least patient). Throws std::invalid_argument naming `io_qos`.
  IoClass resolve(const std::string& io_qos) const;
  /// Throws std::invalid_argument naming the first bad setting.
  void validate() const;
};

/// normal (slowdown 1, usage factor 1), relaxed (2, 0.7) and scavenger (4, 0.5).
std::vector<IoClass> default_io_classes();

/// What one job used, as the charge needs it.
struct Usage {
  int nodes = 1;
  double elapsed = 0;   ///< seconds from start (admission) to end, Slurm's Elapsed
  double io_taken = 0;  ///< seconds its phases took, each from request to end
  double io_alone = 0;  ///< seconds the same phases take alone on their buffers
};

struct Charge {
  double slowdown = 1;        ///< io_taken / io_alone (1 without I/O)
  double refunded = 0;        ///< seconds not billed: I/O time beyond the promised slowdown
  double billed_hours = 0;    ///< node-hours billed
  double amount = 0;          ///< billed node-hours x rate x usage factor
  bool bound_broken = false;  ///< the scheduler let its I/O run slower than the class allows
};

/// The charge of one job of class `io_class`: node-hours of its elapsed time less the I/O time
/// beyond what its class accepts (a refund: it pays nothing for a broken promise), times the
/// rate, times the class's usage factor. A normal job (slowdown 1) is promised nothing and pays
/// its elapsed time, as under Slurm.
Charge charge(const Usage& usage, const IoClass& io_class, const PricingConfig& pricing);

}  // namespace harmonia::core
