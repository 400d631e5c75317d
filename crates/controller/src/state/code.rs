//! The response codes the state machine answers with: Java's `ResponseCode` numbers, so brokers
//! and mqadmin read them as they read the Java controller's.

pub const SUCCESS: i32 = 0;
pub const SYSTEM_ERROR: i32 = 1;
pub const REQUEST_CODE_NOT_SUPPORTED: i32 = 3;
pub const NO_PERMISSION: i32 = 16;
pub const CONTROLLER_FENCED_MASTER_EPOCH: i32 = 2000;
pub const CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH: i32 = 2001;
pub const CONTROLLER_INVALID_MASTER: i32 = 2002;
pub const CONTROLLER_INVALID_REPLICAS: i32 = 2003;
pub const CONTROLLER_MASTER_NOT_AVAILABLE: i32 = 2004;
pub const CONTROLLER_INVALID_REQUEST: i32 = 2005;
pub const CONTROLLER_BROKER_NOT_ALIVE: i32 = 2006;
pub const CONTROLLER_NOT_LEADER: i32 = 2007;
pub const CONTROLLER_BROKER_METADATA_NOT_EXIST: i32 = 2008;
pub const CONTROLLER_INVALID_CLEAN_BROKER_METADATA: i32 = 2009;
pub const CONTROLLER_BROKER_NEED_TO_BE_REGISTERED: i32 = 2010;
/// Brokers treat it as success: the master they asked about is still the master.
pub const CONTROLLER_MASTER_STILL_EXIST: i32 = 2011;
pub const CONTROLLER_ELECT_MASTER_FAILED: i32 = 2012;
pub const CONTROLLER_ALTER_SYNC_STATE_SET_FAILED: i32 = 2013;
pub const CONTROLLER_BROKER_ID_INVALID: i32 = 2014;
pub const CONTROLLER_JRAFT_INTERNAL_ERROR: i32 = 2015;
pub const CONTROLLER_BROKER_LIVE_INFO_NOT_EXISTS: i32 = 2016;
