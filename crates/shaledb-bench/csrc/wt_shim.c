/*
 * A thin C shim over WiredTiger's C API (WiredTiger 3.2, Debian libwiredtiger-dev) for the
 * ShaleDB benchmark adapter. WiredTiger's API is a set of structs of function pointers; calling
 * them from C keeps the struct layouts in the compiler's hands instead of in hand-written Rust
 * declarations. Every function returns WiredTiger's int error code (0 = success).
 *
 * Keys and values use key_format=u / value_format=u (raw bytes, WT_ITEM).
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <wiredtiger.h>

int shwt_notfound(void) { return WT_NOTFOUND; }
int shwt_rollback(void) { return WT_ROLLBACK; }

const char *shwt_strerror(int err) { return wiredtiger_strerror(err); }

int shwt_open(const char *home, const char *config, WT_CONNECTION **connp) {
	*connp = NULL;
	return wiredtiger_open(home, NULL, config, connp);
}

int shwt_conn_close(WT_CONNECTION *conn) { return conn->close(conn, NULL); }

int shwt_open_session(WT_CONNECTION *conn, WT_SESSION **sessionp) {
	*sessionp = NULL;
	return conn->open_session(conn, NULL, NULL, sessionp);
}

int shwt_session_close(WT_SESSION *session) { return session->close(session, NULL); }

int shwt_create(WT_SESSION *session, const char *uri, const char *config) {
	return session->create(session, uri, config);
}

int shwt_open_cursor(WT_SESSION *session, const char *uri, const char *config,
    WT_CURSOR **cursorp) {
	*cursorp = NULL;
	return session->open_cursor(session, uri, NULL, config, cursorp);
}

int shwt_cursor_close(WT_CURSOR *cursor) { return cursor->close(cursor); }

int shwt_cursor_reset(WT_CURSOR *cursor) { return cursor->reset(cursor); }

int shwt_begin(WT_SESSION *session, const char *config) {
	return session->begin_transaction(session, config);
}

int shwt_commit(WT_SESSION *session, const char *config) {
	return session->commit_transaction(session, config);
}

int shwt_rollback_txn(WT_SESSION *session) {
	return session->rollback_transaction(session, NULL);
}

int shwt_checkpoint(WT_SESSION *session, const char *config) {
	return session->checkpoint(session, config);
}

int shwt_compact(WT_SESSION *session, const char *uri, const char *config) {
	return session->compact(session, uri, config);
}

/* Inserts or overwrites (cursors are opened with the default overwrite=true). */
int shwt_put(WT_CURSOR *cursor, const void *key, size_t klen, const void *val, size_t vlen) {
	WT_ITEM k, v;
	memset(&k, 0, sizeof(k));
	memset(&v, 0, sizeof(v));
	k.data = key;
	k.size = klen;
	v.data = val;
	v.size = vlen;
	cursor->set_key(cursor, &k);
	cursor->set_value(cursor, &v);
	return cursor->insert(cursor);
}

/*
 * Removes a key; with overwrite=true a missing key is not an error. The cursor may keep a
 * reference to the caller's key after remove, so it is reset before returning.
 */
int shwt_remove(WT_CURSOR *cursor, const void *key, size_t klen) {
	WT_ITEM k;
	int ret, tret;
	memset(&k, 0, sizeof(k));
	k.data = key;
	k.size = klen;
	cursor->set_key(cursor, &k);
	ret = cursor->remove(cursor);
	tret = cursor->reset(cursor);
	return ret != 0 ? ret : tret;
}

/*
 * Searches for a key. On success *valp and *vlenp point into memory owned by the cursor, valid
 * until the cursor is next moved, reset or closed: the caller copies it, then resets.
 */
int shwt_search(WT_CURSOR *cursor, const void *key, size_t klen, const void **valp,
    size_t *vlenp) {
	WT_ITEM k, v;
	int ret;
	memset(&k, 0, sizeof(k));
	memset(&v, 0, sizeof(v));
	*valp = NULL;
	*vlenp = 0;
	k.data = key;
	k.size = klen;
	cursor->set_key(cursor, &k);
	if ((ret = cursor->search(cursor)) != 0)
		return ret;
	if ((ret = cursor->get_value(cursor, &v)) != 0)
		return ret;
	*valp = v.data;
	*vlenp = v.size;
	return 0;
}

/* Positions near a key; *exactp < 0, 0, > 0 as WT_CURSOR::search_near. */
int shwt_search_near(WT_CURSOR *cursor, const void *key, size_t klen, int *exactp) {
	WT_ITEM k;
	memset(&k, 0, sizeof(k));
	k.data = key;
	k.size = klen;
	*exactp = 0;
	cursor->set_key(cursor, &k);
	return cursor->search_near(cursor, exactp);
}

int shwt_next(WT_CURSOR *cursor) { return cursor->next(cursor); }

int shwt_prev(WT_CURSOR *cursor) { return cursor->prev(cursor); }

/* The current key and value of a positioned cursor (memory owned by the cursor). */
int shwt_current(WT_CURSOR *cursor, const void **keyp, size_t *klenp, const void **valp,
    size_t *vlenp) {
	WT_ITEM k, v;
	int ret;
	memset(&k, 0, sizeof(k));
	memset(&v, 0, sizeof(v));
	*keyp = NULL;
	*klenp = 0;
	*valp = NULL;
	*vlenp = 0;
	if ((ret = cursor->get_key(cursor, &k)) != 0)
		return ret;
	if ((ret = cursor->get_value(cursor, &v)) != 0)
		return ret;
	*keyp = k.data;
	*klenp = k.size;
	*valp = v.data;
	*vlenp = v.size;
	return 0;
}

/*
 * Steps a "statistics:" cursor: returns 0 with the description (a NUL-terminated string owned by
 * the cursor, valid until the next step) and the value, WT_NOTFOUND at the end.
 */
int shwt_stat_next(WT_CURSOR *cursor, const char **descp, int64_t *valuep) {
	const char *desc, *pvalue;
	int64_t value;
	int ret;
	*descp = NULL;
	*valuep = 0;
	if ((ret = cursor->next(cursor)) != 0)
		return ret;
	if ((ret = cursor->get_value(cursor, &desc, &pvalue, &value)) != 0)
		return ret;
	*descp = desc;
	*valuep = value;
	return 0;
}
