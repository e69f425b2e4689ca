#pragma once
/// @file A buffer node's requests (bb.proto): one frame body decoded and answered against the
/// node's store. No sockets: harmonia-bbd's connections and the fuzz tests call the same code.

#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "bbd/store.hpp"
#include "common/identity.hpp"
#include "control/bb.pb.h"

namespace harmonia::bbd {

/// Who may ask what of this node (docs/security.md, "Identity").
struct Access {
  common::Administrators admins;
  /// Decodes an Authenticate's credential (common::CredentialChecker); unset: none is accepted.
  std::function<std::optional<common::Identity>(const std::string&, std::string&)> check_credential;
  /// Whether an Authenticate's credential may stand beside the user a connection already acts
  /// for (common::CredentialChecker::confirms); unset: every one may (it changes nothing).
  std::function<bool(uid_t, const std::string&, std::string&)> confirm_credential;
  /// Publish: tells the scheduler the files held now and returns once it has them; false with
  /// `why` when there is no scheduler to tell. Unset: a node with no scheduler.
  std::function<bool(std::string& why)> publish;
};

/// One connection's identity, once it authenticated.
struct Session {
  std::optional<common::Identity> who;
};

/// The largest request frame body a node reads: a write of 16 MiB and its envelope.
constexpr std::size_t kMaxRequestBytes = (16UL << 20) + 4096;
/// The largest raw payload after a Write's frame (Write.payload).
constexpr std::size_t kMaxPayloadBytes = 16UL << 20;

/// The response to a frame that holds no valid Request.
bb::Response malformed();
/// The response to one frame body on a connection; MALFORMED when it holds no valid Request.
bb::Response answer(Store& store, const Access& access, Session& session, const std::string& body);
/// The response to a decoded request; `payload` holds the raw bytes that followed a Write's
/// frame (as many as its `payload` field announced). An Authenticate sets the session's
/// identity; every other request acts for it.
bb::Response answer(Store& store, const Access& access, Session& session,
                    const bb::Request& request, std::string_view payload);
/// The bytes that follow `request`'s frame raw; -1 when it announces more than
/// kMaxPayloadBytes (the stream cannot be read on).
long long payload_bytes(const bb::Request& request);

/// The response to a frame, or a write's raw payload (`what`), announcing `length` bytes over
/// `limit` (the node then closes the connection: the stream cannot be resynchronised).
bb::Response refuse_oversized(const char* what, std::size_t length, std::size_t limit);

}  // namespace harmonia::bbd
