//! Estimators shared by the controllers: the TCP throughput equation, loss estimators, RTT,
//! packet-pair and packet-bunch bandwidth samples, one-way-delay trend detection.
