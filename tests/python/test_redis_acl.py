"""ACL users through redis-py, in RESP2 and RESP3 (Redis 7.0 behaviour).

Each test makes its own users (named after the test's key namespace) and deletes them, and
never changes the default user, so the tests can share one server.
"""

import pytest
from redis.exceptions import AuthenticationError, ConnectionError, NoPermissionError, ResponseError

from conftest import _port, redis_client


@pytest.fixture
def user(r, k):
    name = "u-" + k.ns.strip(":").replace(":", "-")
    yield name
    r.acl_deluser(name)


def test_setuser_and_auth_with_a_username(r, k, user, proto):
    assert r.acl_setuser(user, enabled=True, passwords=["+secret"], commands=["+get", "+set", "+acl|whoami"], keys=[k("*")])
    info = r.acl_getuser(user)
    assert "on" in info["flags"]
    assert sorted(info["commands"]) == ["+acl|whoami", "+get", "+set"]  # redis-py splits the rules
    assert f"~{k('*')}" in info["keys"]
    assert len(info["passwords"]) == 1 and len(info["passwords"][0]) == 64
    assert user in r.acl_users()
    c = redis_client(_port("LARDER_RESP_PORT"), proto, username=user, password="secret")
    try:
        assert c.acl_whoami() == user
        assert c.set(k("a"), "1") is True
        assert c.get(k("a")) == "1"
        with pytest.raises(NoPermissionError, match="no permissions to access one of the keys"):
            c.get("elsewhere")
        with pytest.raises(NoPermissionError, match="no permissions to run the 'append' command"):
            c.append(k("a"), "x")
    finally:
        c.close()
    bad = redis_client(_port("LARDER_RESP_PORT"), proto, username=user, password="wrong")
    with pytest.raises(AuthenticationError):
        bad.ping()
    bad.close()
    log = r.acl_log(count=1)
    assert log[0]["reason"] == "auth" and log[0]["username"] == user


def test_dryrun_and_categories(r, k, user):
    r.acl_setuser(user, enabled=True, nopass=True, commands=["+@string", "-append"], keys=["%R~" + k("*")])
    assert r.execute_command("ACL", "DRYRUN", user, "GET", k("x")) == "OK"
    assert r.execute_command("ACL", "DRYRUN", user, "SET", k("x"), "v") == (
        f"This user has no permissions to access the '{k('x')}' key"
    )
    assert r.execute_command("ACL", "DRYRUN", user, "APPEND", k("x"), "v") == (
        "This user has no permissions to run the 'append' command"
    )
    assert "get" in r.acl_cat("string")
    assert "keyspace" in r.acl_cat()
    with pytest.raises(ResponseError, match="Unknown category"):
        r.acl_cat("nosuch")


def test_deleting_a_user_closes_its_connection(r, k, user, proto):
    r.acl_setuser(user, enabled=True, nopass=True, commands=["+@all"], keys=["*"])
    c = redis_client(_port("LARDER_RESP_PORT"), proto, username=user, password="x")
    assert c.ping() is True
    assert f"user={user}" in r.execute_command("CLIENT", "LIST")
    r.acl_deluser(user)
    r.acl_setuser(user)  # off: a reconnection cannot log in again (the fixture deletes it)
    # The connection was closed: redis-py sees it closed, and may reconnect, which fails.
    with pytest.raises((ConnectionError, AuthenticationError)):
        c.ping()
    c.close()
