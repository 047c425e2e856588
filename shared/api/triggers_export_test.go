package api

// DeliveryRunID exposes the run id a delivery creates, so a test can stage
// a claim whose run was never written (a crash between the two).
var DeliveryRunID = deliveryRunID
