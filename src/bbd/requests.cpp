#include "bbd/requests.hpp"

namespace harmonia::bbd {

namespace {

bb::Response::Code code_of(Status status) {
  switch (status) {
    case Status::Ok:
      return bb::Response::OK;
    case Status::Full:
      return bb::Response::FULL;
    case Status::NotHeld:
      return bb::Response::NOT_HELD;
    case Status::Invalid:
      return bb::Response::INVALID;
    case Status::Error:
      return bb::Response::ERROR;
    case Status::Forbidden:
      return bb::Response::FORBIDDEN;
  }
  return bb::Response::ERROR;
}

void fill_status(Store& store, bb::NodeStatus& out) {
  const StoreStats s = store.stats();
  out.set_capacity(s.capacity);
  out.set_used(s.used);
  out.set_files(s.files);
  out.set_draining(s.draining);
  out.set_drained_bytes(s.drained);
  out.set_received_bytes(s.received);
  out.set_staged_bytes(s.staged);
  out.set_staged_read_bytes(s.staged_read);
  out.set_orphaned_bytes(s.orphaned);
}

}  // namespace

bb::Response malformed() {
  bb::Response response;
  response.set_code(bb::Response::MALFORMED);
  response.set_message("the frame does not hold a valid Request");
  return response;
}

bb::Response answer(Store& store, const Access& access, Session& session, const std::string& body) {
  bb::Request request;
  if (!request.ParseFromString(body)) return malformed();
  return answer(store, access, session, request, {});
}

long long payload_bytes(const bb::Request& request) {
  if (!request.has_write()) return 0;
  const std::uint64_t n = request.write().payload();
  return n > kMaxPayloadBytes ? -1 : static_cast<long long>(n);
}

bb::Response answer(Store& store, const Access& access, Session& session,
                    const bb::Request& request, std::string_view payload) {
  bb::Response response;
  response.set_seq(request.seq());
  if (request.has_authenticate()) {
    if (session.who) {  // clients send a credential wherever munged makes one: it may confirm
      std::string why;
      if (access.confirm_credential &&
          !access.confirm_credential(session.who->uid, request.authenticate().credential(), why)) {
        response.set_code(bb::Response::UNAUTHENTICATED);
        response.set_message(why);
        return response;
      }
      response.set_code(bb::Response::OK);
      response.set_uid(session.who->uid);
      return response;
    }
    std::string why =
        "this node takes no credentials (--auth peer: it knows its clients from the kernel; "
        "clients on other hosts need --auth munge)";
    session.who = access.check_credential
                      ? access.check_credential(request.authenticate().credential(), why)
                      : std::nullopt;
    response.set_code(session.who ? bb::Response::OK : bb::Response::UNAUTHENTICATED);
    if (session.who)
      response.set_uid(session.who->uid);
    else
      response.set_message(why);
    return response;
  }
  if (!session.who) {
    response.set_code(bb::Response::UNAUTHENTICATED);
    response.set_message(
        "this connection has no identity: from another host, send Authenticate with a MUNGE "
        "credential first (harmonia-bbd --auth munge)");
    return response;
  }
  const Caller caller{session.who->uid, session.who->gid, access.admins.contains(session.who->uid)};
  std::string why;
  Status status = Status::Ok;
  switch (request.body_case()) {
    case bb::Request::kWrite: {
      const auto& write = request.write();
      if (write.payload() != payload.size() || (!payload.empty() && !write.data().empty())) {
        status = Status::Invalid;
        why = "the bytes go in the message or after it, as many as announced";
        break;
      }
      status = store.write({write.file(), write.inode(), write.handle()}, write.offset(),
                           payload.empty() ? write.data() : payload, write.job(), why, caller);
      break;
    }
    case bb::Request::kRead: {
      const auto& read = request.read();
      if (read.has_identity()) {  // a read phase's reader: the staged-in copy, if it is current
        const FileIdentity identity{read.identity().size(), read.identity().mtime_ns(),
                                    read.identity().ctime_ns(), read.identity().inode()};
        status = store.read_staged(read.file(), read.offset(), read.length(), identity,
                                   *response.mutable_data(), why, caller);
      } else {
        status = store.read({read.file(), read.inode()}, read.offset(), read.length(),
                            *response.mutable_data(), why, caller);
      }
      if (status != Status::Ok) response.clear_data();
      break;
    }
    case bb::Request::kDrain:
      status = store.drain({request.drain().file(), request.drain().inode()}, why, caller);
      break;
    case bb::Request::kStatus:
      fill_status(store, *response.mutable_status());
      break;
    case bb::Request::kPublish:
      why = "this node reports to no scheduler";
      status = access.publish && access.publish(why) ? Status::Ok : Status::Error;
      if (status == Status::Ok) why.clear();
      break;
    case bb::Request::kAuthenticate:  // answered above
    case bb::Request::BODY_NOT_SET:
      response.set_code(bb::Response::MALFORMED);
      response.set_message("no request this node knows");
      return response;
  }
  response.set_code(code_of(status));
  response.set_message(why);
  return response;
}

bb::Response refuse_oversized(const char* what, std::size_t length, std::size_t limit) {
  bb::Response refused;
  refused.set_code(bb::Response::MALFORMED);
  refused.set_message(std::string(what) + " of " + std::to_string(length) + " bytes: at most " +
                      std::to_string(limit));
  return refused;
}

}  // namespace harmonia::bbd
